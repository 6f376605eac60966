"""GpuOpCosts against a hand roofline: max(FLOPs / (peak x eff), bytes / (HBM x eff)) + overhead."""
import pytest

from trnsim.errors import ConfigError, HardwareFileError
from trnsim.model.gpu.costs import GpuOpCosts
from trnsim.model.gpu.efficiency import EFFICIENCY_FILE
from trnsim.model.ops import Op, OpCosts

H100_BF16 = 1979e12 / 2   # datasheet, dense
H100_HBM = 3.35e12
B200_FP8 = 72e15 / 8 / 2  # HGX B200: 72 PF sparse for 8 GPUs
B200_BF16 = 36e15 / 8 / 2
FIXED = {"matmul": 0.5, "attention": 0.4, "memory": 0.8, "kernel_overhead_s": 0.0}


def test_is_an_opcosts():
    assert isinstance(GpuOpCosts("h100-sxm"), OpCosts)


def test_compute_bound_matmul():
    c = GpuOpCosts("p5.48xlarge", "bf16", efficiency=FIXED)
    t = c.time(Op(kind="matmul", name="mm", m=8192, k=8192, n=8192))
    assert t.how == "roofline"
    assert t.seconds == pytest.approx(2 * 8192 ** 3 / (H100_BF16 * 0.5), rel=1e-3)


def test_memory_bound_matmul_gemv():
    c = GpuOpCosts("h100-sxm", "bf16", efficiency=FIXED)
    t = c.time(Op(kind="matmul", name="gemv", m=1, k=8192, n=8192))
    bytes_ = (8192 + 8192 * 8192 + 8192) * 2
    assert t.seconds == pytest.approx(bytes_ / (H100_HBM * 0.8), rel=1e-6)


def test_batch_and_given_figures():
    c = GpuOpCosts("h100-sxm", "bf16", efficiency=FIXED)
    t = c.time(Op(kind="matmul", name="mm", m=4096, k=4096, n=4096, batch=3))
    assert t.seconds == pytest.approx(3 * 2 * 4096 ** 3 / (H100_BF16 * 0.5), rel=1e-3)
    # an Op's own flops / bytes figures win over the shape
    t = c.time(Op(kind="matmul", name="mm", m=1, k=1, n=1, flops=1e12, bytes=1.0))
    assert t.seconds == pytest.approx(1e12 / (H100_BF16 * 0.5), rel=1e-3)


def test_memory_bound_kinds():
    c = GpuOpCosts("h100-sxm", "bf16", efficiency=FIXED)
    # rmsnorm over 8192 x 4096 bf16: read x, write y (2 passes in efficiency.toml)
    t = c.time(Op(kind="norm", name="rms", rows=8192, cols=4096))
    assert t.seconds == pytest.approx(8192 * 4096 * 2 * 2 / (H100_HBM * 0.8), rel=1e-6)
    t = c.time(Op(kind="elementwise", name="add", rows=1000, cols=1000, dtype="float32", bytes=12e6))
    assert t.seconds == pytest.approx(12e6 / (H100_HBM * 0.8), rel=1e-6)
    # FLOPs never make a memory-bound kind slower
    t = c.time(Op(kind="softmax", name="sm", rows=10, cols=10, flops=1e15))
    assert t.seconds < 1e-6


def test_causal_attention_and_precisions():
    c = GpuOpCosts("b200", "fp8", efficiency=FIXED)
    q = kv = 8192
    t = c.time(Op(kind="attention", name="fa", q_len=q, kv_len=kv, head_dim=128, heads=32, causal=True))
    flops = 4 * q * kv * 128 * 32 / 2
    # attention runs at bf16 (attention.precision) even when matmuls run at fp8
    assert t.seconds == pytest.approx(flops / (B200_BF16 * 0.4), rel=1e-3)
    t = c.time(Op(kind="matmul", name="mm", flops=1e15))
    assert t.seconds == pytest.approx(1e15 / (B200_FP8 * 0.5), rel=1e-3)


def test_default_factors_are_the_files():
    c = GpuOpCosts("h100-sxm")
    assert c.table.matmul["bf16"] == pytest.approx(0.5167)
    # an empty op costs the per-kernel overhead of the file
    assert c.time(Op(kind="matmul", name="nothing")).seconds == pytest.approx(c.table.kernel_overhead_s)
    c = GpuOpCosts("h100-sxm", efficiency={"kernel_overhead_s": 5e-6})
    assert c.time(Op(kind="matmul", name="nothing")).seconds == pytest.approx(5e-6)


def test_bad_inputs_are_named():
    with pytest.raises(ConfigError) as e:
        GpuOpCosts("h100-sxm", "fp4")
    assert e.value.value == "fp4"
    with pytest.raises(ConfigError) as e:
        GpuOpCosts("h100-sxm").time(Op(kind="conv", name="c"))
    assert e.value.value == "conv"
    with pytest.raises(ConfigError) as e:
        GpuOpCosts("h100-sxm", efficiency={"matmul": 1.5})
    assert e.value.value == 1.5
    with pytest.raises(ConfigError) as e:
        GpuOpCosts("h100-sxm", efficiency={"matmull": 0.5})
    with pytest.raises(ConfigError):
        GpuOpCosts("h100-sxm").time(Op(kind="norm", name="n", rows=2, cols=2, dtype="float7"))


def test_malformed_efficiency_file_names_the_key(tmp_path):
    text = open(EFFICIENCY_FILE).read()
    p = tmp_path / "eff.toml"
    p.write_text(text.replace("hbm = { value = 0.85", "hbm = { value = 1.85", 1))
    with pytest.raises(HardwareFileError) as e:
        GpuOpCosts("h100-sxm", efficiency_file=str(p))
    assert "memory.hbm" in str(e.value)
    p.write_text(text.replace('fp8 = { value = 0.3691, source = "calibration: P310"',
                              'fp8 = { value = 0.3691, sorce = "calibration: P310"', 1))
    with pytest.raises(HardwareFileError) as e:
        GpuOpCosts("h100-sxm", efficiency_file=str(p))
    assert "matmul.fp8" in str(e.value)
