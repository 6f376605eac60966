"""The AST scan for hard-coded CUDA use (no torch needed: it only reads source)."""
from trnsim.frontends.torch.cuda_scan import scan_source

SRC = '''import torch
from flash_attn import flash_attn_func
import apex.normalization
x = torch.zeros(3)
y = x.cuda()
z = torch.ones(2, device="cuda:1")
w = x.to("cuda")
d = torch.device("cuda")
n = torch.cuda.device_count()
torch.backends.cudnn.benchmark = True
ok = x.to("cpu")
also_ok = torch.ones(2, device="cpu")
'''


def test_every_cuda_tie_found_with_its_line():
    found = [(f.line, f.kind) for f in scan_source(SRC, "m.py")]
    assert found == [(2, "gpu-import"), (3, "gpu-import"), (5, "cuda-call"), (6, "cuda-device"),
                     (7, "cuda-device"), (8, "cuda-device"), (9, "torch.cuda"), (10, "torch.cuda")]
    assert scan_source(SRC, "m.py")[2].text == "y = x.cuda()"


def test_clean_and_broken_source():
    assert scan_source("import torch\nx = torch.ones(3)\n") == []
    assert scan_source("def broken(:\n") == []  # syntax errors are reported by the import step instead
