"""trnsim check: op counts, coverage, source lines, custom ops, CUDA code, fallback and bad input,
every expected figure counted by hand from the model files under models/."""
import os

import pytest

torch = pytest.importorskip("torch")

from trnsim.errors import TrnsimError  # noqa: E402
from trnsim.frontends.torch import CaptureError, ModelLoadError, check_model  # noqa: E402

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
GPT = os.path.join(MODELS, "tiny_gpt.py")
CUSTOM = os.path.join(MODELS, "custom_op_model.py")
CUDA = os.path.join(MODELS, "cuda_model.py")
FALLBACK = os.path.join(MODELS, "fallback_model.py")


def line_of(path, text, nth=0):
    """1-based line number of the nth line containing ``text`` (found by reading the file, not trnsim)."""
    hits = [i + 1 for i, ln in enumerate(open(path).read().splitlines()) if text in ln]
    return hits[nth]


@pytest.fixture(scope="module")
def gpt():
    return check_model(f"{GPT}:TinyGPT", "1x128")


def test_tiny_gpt_op_counts_by_hand(gpt):
    # 2 layers; per layer: 2 layer_norm, 4 linear, 1 split, 3+1 view, 3+1 transpose, 1 sdpa, 1 contiguous,
    # 1 gelu, 2 residual adds; plus 2 embeddings, 1 arange, 1 add (tok + pos), final layer_norm, head linear
    counts = {r.op: r.count for r in gpt.rows}
    assert counts == {"aten::embedding": 2, "aten::arange": 1, "aten::add": 1 + 2 * 2,
                      "aten::layer_norm": 2 * 2 + 1, "aten::linear": 4 * 2 + 1, "aten::split": 2,
                      "aten::view": 4 * 2, "aten::transpose": 4 * 2,
                      "aten::scaled_dot_product_attention": 2, "aten::contiguous": 2, "aten::gelu": 2}
    assert gpt.capture == "torch.export" and gpt.capture_note == ""
    classes = {r.op: r.op_class for r in gpt.rows}
    assert classes["aten::linear"] == "matmul"
    assert classes["aten::scaled_dot_product_attention"] == "attention"
    assert classes["aten::layer_norm"] == "norm"


def test_tiny_gpt_coverage_by_hand(gpt):
    # on the torch-neuronx list: embedding (2), add (5), view (8), transpose (8) by name; linear (9) because
    # it runs as view / t / addmm / mm / _unsafe_view, all listed.  Not listed: arange, layer_norm
    # (native_layer_norm), split, scaled_dot_product_attention, contiguous (clone), gelu.
    assert gpt.total_ops == 46
    assert gpt.documented_ops == 2 + 5 + 8 + 8 + 9
    assert gpt.documented_pct == pytest.approx(100 * 32 / 46)
    assert gpt.costable_ops == 46 and gpt.costable_pct == 100.0
    documented = {r.op for r in gpt.rows if r.documented}
    assert documented == {"aten::embedding", "aten::add", "aten::view", "aten::transpose", "aten::linear"}
    linear = next(r for r in gpt.rows if r.op == "aten::linear")
    assert {"aten::t", "aten::addmm"} <= set(linear.lowers_to)
    assert gpt.needs_custom_kernel == () and gpt.cuda_findings == ()


def test_source_lines_are_the_users(gpt):
    attn = next(r for r in gpt.rows if r.op == "aten::scaled_dot_product_attention")
    assert attn.locations == (f"{GPT}:{line_of(GPT, 'scaled_dot_product_attention(q, k, v')}",)
    linear = next(r for r in gpt.rows if r.op == "aten::linear")
    assert f"{GPT}:{line_of(GPT, 'self.qkv(self.ln1(x))')}" in linear.locations
    assert f"{GPT}:{line_of(GPT, 'return self.head(')}" in linear.locations
    mods = [op.module for op in gpt.ops if op.name == "linear"]
    assert mods[:4] == ["blocks.0.qkv", "blocks.0.proj", "blocks.0.fc", "blocks.0.out"]
    assert mods[-1] == "head"


def test_custom_op_reported_with_its_line():
    r = check_model(f"{CUSTOM}:CustomMLP", "4x32", "float32")
    row = next(x for x in r.rows if x.op == "trnsim_test::fused_bias_gelu")
    assert row.op_class == "custom" and row.count == 1 and not row.documented and not row.costable
    assert row.locations == (f"{CUSTOM}:{line_of(CUSTOM, 'torch.ops.trnsim_test.fused_bias_gelu')}",)
    assert [x.op for x in r.needs_custom_kernel] == ["trnsim_test::fused_bias_gelu"]
    assert r.to_dict()["non_aten_ops"] == ["trnsim_test::fused_bias_gelu"]
    # two linears (costable, on the list through t/addmm/mm) and the custom op
    assert (r.total_ops, r.documented_ops, r.costable_ops) == (3, 2, 2)


def test_untraceable_op_is_named_with_its_line():
    with pytest.raises(CaptureError) as e:
        check_model(f"{CUSTOM}:Untraceable", "4x32", "float32")
    assert e.value.value == "trnsim_test::no_meta_kernel"
    assert e.value.where.startswith(f"{CUSTOM}:{line_of(CUSTOM, 'torch.ops.trnsim_test.no_meta_kernel')}")
    assert "register_fake" in e.value.hint


def test_cuda_code_found_and_model_still_captured():
    r = check_model(f"{CUDA}:CudaMLP", "2x32", "float32")
    found = {(f.line, f.kind) for f in r.cuda_findings}
    assert found == {(line_of(CUDA, "torch.cuda.is_available"), "torch.cuda"),
                     (line_of(CUDA, "x.cuda()"), "cuda-call"),
                     (line_of(CUDA, 'torch.ones(x.shape'), "cuda-device"),
                     (line_of(CUDA, '.to("cuda")'), "cuda-device")}
    assert all(f.file == CUDA for f in r.cuda_findings)
    assert next(x for x in r.rows if x.op == "aten::linear").count == 1


def test_export_failure_falls_back_to_dispatch_trace():
    r = check_model(f"{FALLBACK}:ObjectOutMLP", "2x32", "float32")
    assert r.capture == "dispatch-trace" and "torch.export failed" in r.capture_note
    # at the dispatcher each nn.Linear on a 2-D input is t + addmm; then one relu
    assert {x.op: x.count for x in r.rows} == {"aten::t": 2, "aten::addmm": 2, "aten::relu": 1}
    assert [op.module for op in r.ops] == ["fc1", "fc1", "act", "fc2", "fc2"]
    assert r.documented_ops == 5  # t, addmm and relu are all on the list


def test_module_instance_and_class_accepted():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fb_model", FALLBACK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    by_class = check_model(mod.ObjectOutMLP, (2, 32), "float32", capture_with="dispatch")
    with torch.device("meta"):
        inst = mod.ObjectOutMLP()
    by_instance = check_model(inst, [(2, 32)], "float32", capture_with="dispatch")
    assert by_class.total_ops == by_instance.total_ops == 5


@pytest.mark.parametrize("spec, shape, dtype, rule", [
    (os.path.join(MODELS, "missing.py") + ":M", "1x8", "int64", "model-file"),
    (f"{GPT}:TinyGTP", "1x8", "int64", "model-class"),
    (GPT, "1x8", "int64", "model-spec"),
    (f"{GPT}:TinyGPT", "1xfoo", "int64", "input-shape"),
    (f"{GPT}:TinyGPT", "0x8", "int64", "input-shape"),
    (f"{GPT}:TinyGPT", "1x8", "int12", "dtype"),
])


def test_bad_input_names_the_rule(spec, shape, dtype, rule):
    with pytest.raises(TrnsimError) as e:
        check_model(spec, shape, dtype)
    assert e.value.rule == rule
    if rule == "model-class":
        assert "TinyGPT" in e.value.hint and e.value.value == "TinyGTP"


def test_bad_constructor_argument_is_a_load_error():
    with pytest.raises(ModelLoadError) as e:
        check_model(f"{GPT}:TinyGPT", "1x8", kwargs={"no_such_arg": 3})
    assert e.value.rule == "model-init" and "no_such_arg" in str(e.value)


def test_ops_inside_a_no_grad_region_are_counted():
    path = os.path.join(MODELS, "linear_model.py")
    r = check_model(f"{path}:NoGradRegion", "2x8", "float32")
    assert {x.op: x.count for x in r.rows} == {"aten::linear": 2, "aten::relu": 1}
    linear = next(x for x in r.rows if x.op == "aten::linear")
    assert linear.locations[0] == f"{path}:{line_of(path, 'y = self.a(x)')}" and linear.documented


def test_broken_model_files_name_their_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\nclass M(torch.nn.Module:\n    pass\n")
    with pytest.raises(ModelLoadError) as e:
        check_model(f"{bad}:M", "1x8")
    assert e.value.rule == "model-import" and e.value.where == f"{bad}:3"
    gpu = tmp_path / "gpu.py"
    gpu.write_text("import torch\nimport flash_attn\n")
    with pytest.raises(ModelLoadError) as e:
        check_model(f"{gpu}:M", "1x8")
    assert e.value.where.startswith(f"{gpu}:2") and "GPU-only" in e.value.hint
