"""Precision and sparsity per generation; the roofline op costs."""
import pytest

from trnsim.hardware import get_chip, get_core, load_catalog
from trnsim.model import Op, RooflineOpCosts, estimate_inference, load_model
from trnsim.model.datafiles import figure
from trnsim.model.infer import chips_needed
from trnsim.model.params import count_params
from trnsim.model.precision import PrecisionError, resolve


def test_roofline_matmul_by_hand():
    core, chip = get_core("trn1"), get_chip("trn1")
    r = RooflineOpCosts(core, chip, 1)
    peak = 128 * 128 * 2 * core.clocks.tensor_hz
    bw = chip.hbm_bandwidth_bytes_per_s / chip.cores
    op = Op(kind="matmul", name="mm", m=4096, k=4096, n=4096, flops=2 * 4096**3, bytes=3 * 4096**2 * 2)
    assert r.time(op).seconds == pytest.approx(max(op.flops / peak, op.bytes / bw))
    thin = Op(kind="matmul", name="gemv", m=1, k=8192, n=8192, flops=2 * 8192**2, bytes=8192**2 * 2)
    assert r.time(thin).seconds == pytest.approx(thin.bytes / bw)
    assert r.time(thin).how == "roofline"


def test_precision_per_generation():
    for t in ("trn1", "trn2"):
        with pytest.raises(PrecisionError):
            resolve("mxfp8", None, get_core(t), get_chip(t))
    p = resolve("mxfp4", None, get_core("trn3"), get_chip("trn3"))
    assert p.weight_bytes == pytest.approx(0.5 + 1 / 32)   # 4 bits + an 8-bit scale per 32 values
    assert "BF16 rate" in resolve("fp8", None, get_core("trn1"), get_chip("trn1")).note
    with pytest.raises(PrecisionError):
        resolve("bf16", "4:16", get_core("trn1"), get_chip("trn1"))
    with pytest.raises(PrecisionError):
        resolve("bf16", "3:7", get_core("trn2"), get_chip("trn2"))
    sp = resolve("bf16", "4:16", get_core("trn2"), get_chip("trn2"))
    pf = get_chip("trn2").peak_flops
    assert sp.sparse_speedup == pytest.approx(pf.sparse / pf.bf16)
    assert "not expose" in sp.note


def test_fp4_weights_shrink_chips_needed():
    cfg = load_model("llama-3.1-405b")
    bf16 = estimate_inference(cfg, "trn3-gen2-ultraserver" if _has("trn3-gen2-ultraserver") else _trn3(), tp=64,
                              lnc=2, batch=1, input_len=128, output_len=128, check_memory=False)
    fp4 = estimate_inference(cfg, bf16.instance, tp=64, lnc=2, batch=1, input_len=128, output_len=128,
                             precision="mxfp4", check_memory=False)
    chip = get_chip("trn3")
    usable = chip.hbm_bytes - chip.cores * figure("estimator", "memory.reserved_bytes_per_core")
    import math
    kv = 126 * 256 * 2 * 8 * 128 * 2
    assert fp4.chips_needed == math.ceil((count_params(cfg).total * (0.5 + 1 / 32) + kv) / usable)
    assert fp4.chips_needed < bf16.chips_needed
    assert fp4.memory["weights_gib"] < bf16.memory["weights_gib"] / 3.5


def _has(name):
    try:
        load_catalog().instance(name)
        return True
    except Exception:
        return False


def _trn3():
    return next(k for k, v in load_catalog().instances.items() if v.chip == "trn3")
