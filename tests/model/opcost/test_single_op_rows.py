"""The single-op calibration rows copied into bench/data/single_ops.csv: the file parses, every row it
uses names an op with a reference kernel and a full shape, every skipped row says why, and the figures
derived from a row's other numbers (noted in its derivation column) agree with a hand calculation."""
import csv
import os

import pytest

from trnsim.kernels import KERNELS
from trnsim.model.opcost.select import kernel_call
from trnsim.model.ops import Op

ROWS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "data", "single_ops.csv")
SHAPE = {"matmul": ("m", "k", "n"), "attention": ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim")}


def _rows():
    with open(ROWS, newline="") as f:
        return list(csv.DictReader(f))


def _row(rid, variant=""):
    return next(r for r in _rows() if r["id"] == rid and r["variant"] == variant)


def test_rows_parse_and_name_a_reference_kernel():
    rows = _rows()
    used = [r for r in rows if r["status"] == "use"]
    assert len(used) >= 10
    for r in rows:
        assert r["id"][0] == "P" and r["id"][1:].isdigit(), r["id"]
        assert r["source"], r["id"]
        assert r["status"] in ("use", "skip"), r["id"]
        assert r["derivation"], f"{r['id']}: a skipped row needs its reason, a used one its reading"
    for r in used:
        assert r["op"] in KERNELS, r["id"]
        assert r["dtype"] in KERNELS[r["op"]].dtypes, r["id"]
        assert float(r["published_us"]) > 0, r["id"]
        for field in SHAPE[r["op"]]:
            assert int(r[field]) > 0, f"{r['id']} lacks {field}"
        if r["op"] == "attention":
            assert r["causal"] in ("0", "1"), r["id"]


def test_derived_figures_match_the_rows_own_numbers():
    # P250 states 808.34 TFLOP/s, not a latency: 2 x 12288 x 8192 x 8192 / 808.34e12 s = 2040.4 us
    assert float(_row("P250")["published_us"]) == pytest.approx(2 * 12288 * 8192 * 8192 / 808.34e12 * 1e6,
                                                                abs=0.1)
    # P259 states 124.1 TFLOP/s at 276.8 us: M=1024, K=N=4096 gives 34.36 GFLOP / 276.8 us = 124.1e12
    r = _row("P259")
    assert 2 * int(r["m"]) * int(r["k"]) * int(r["n"]) / 276.8e-6 == pytest.approx(124.1e12, rel=2e-3)
    # P261 eager states 15.9 TFLOP/s at 539.3 us: the causal count, 0.5 x 4 x 8 x 2048^2 x 128
    assert 0.5 * 4 * 8 * 2048 ** 2 * 128 / 539.3e-6 == pytest.approx(15.9e12, rel=5e-3)
    assert _row("P261", "eager")["causal"] == "1"


def test_lnc2_rows_split_heads_over_the_two_cores():
    # 80 query heads on one logical core of two physical cores: 40 kernel calls per physical core
    call = kernel_call(Op(kind="attention", name="a", q_len=4096, kv_len=4096, head_dim=128, heads=80,
                          causal=True), lnc=2)
    assert (call.kernel, call.repeats, call.shape["q_len"]) == ("attention", 40, 4096)
