"""A new GPU system is one hardware file: the GPU, the system and its NCCL generation, and every estimator
and the fabric accept it."""
import pytest

from trnsim.errors import HardwareFileError
from trnsim.fabric import collective
from trnsim.model import estimate_inference, estimate_training
from trnsim.model.context import make_context

NEW = '''
[gpus.gpus.x300]
name = "what-if X300"
bf16_flops = { value = 2.0e15, source = "choice: what-if" }
fp8_flops = { value = 4.0e15, source = "choice: what-if" }
hbm_bytes = { value = 200e9, source = "choice: what-if" }
hbm_bandwidth_bytes_per_s = { value = 1.0e13, source = "choice: what-if" }
nvlink_bandwidth_bytes_per_s = { value = 1.8e12, source = "choice: what-if" }
tdp_watts = { value = 1200.0, source = "choice: what-if" }

[gpus.systems."x7.48xlarge"]
name = "x7.48xlarge (8 x X300)"
kind = "instance"
gpu = "x300"
gpus = { value = 8, source = "choice: what-if" }
nvlink_domain = { value = 8, source = "choice: what-if" }
network_bandwidth_bits_per_s = { value = 3.2e12, source = "choice: what-if" }

[fabric.nccl.gpu_generation]
x300 = "blackwell"
'''


def test_one_file_adds_a_gpu_system(tmp_path):
    hw = tmp_path / "x7.toml"
    hw.write_text(NEW)
    e = estimate_inference("llama-3-8b", "x7.48xlarge", tp=8, batch=1, input_len=128, output_len=128,
                           hardware_file=str(hw))
    assert e.instance == "x7.48xlarge" and e.cores == 8
    # batch-1 decode streams the weights at the new GPU's 10 TB/s: at least 16 GB / 8 GPUs / 10 TB/s
    assert e.tpot_ms / 1e3 >= 8.03e9 * 2 / 8 / 1.0e13
    t = estimate_training("llama-3-8b", "x7.48xlarge", tp=8, seq=2048, global_batch=8, recompute="full",
                          hardware_file=str(hw))
    assert t.cores == 8 and 0 < t.mfu < 1
    ctx = make_context("llama-3-8b", "x7.48xlarge", hardware_file=str(hw))
    ranks = list(range(8))
    assert ctx.comm_s("all-reduce", 16384, ranks) == pytest.approx(
        collective("x7.48xlarge", "all-reduce", 16384, ranks, hardware_file=str(hw)).time_us * 1e-6, rel=1e-12)


def test_a_generation_name_must_be_a_name(tmp_path):
    hw = tmp_path / "bad.toml"
    hw.write_text(NEW.replace('x300 = "blackwell"', "x300 = 3"))
    with pytest.raises(HardwareFileError) as e:
        estimate_inference("llama-3-8b", "x7.48xlarge", tp=8, hardware_file=str(hw))
    assert e.value.rule == "hardware-file-type"
