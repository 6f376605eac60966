"""SimulatedOpCosts with fake timers of known formulas: cache round trip, keys, interpolation."""
import math
import multiprocessing as mp
import os
import sqlite3

import pytest

from trnsim.errors import TrnsimError
from trnsim.model.ops import Op
from trnsim.model.opcost import SimulatedOpCosts
from trnsim.model.opcost.cache import DB_NAME


class CountingTimer:
    """t = 1e-9 * (1000 + m * k * n / 1e3) seconds for matmul, 1e-9 * rows * cols otherwise."""
    versions = {"matmul": 3}

    def __init__(self):
        self.calls = 0

    def __call__(self, kernel, shape, dtype, target, hardware_file=None):
        self.calls += 1
        if kernel == "matmul":
            return 1e-9 * (1000 + shape["m"] * shape["k"] * shape["n"] / 1e3)
        return 1e-9 * shape["rows"] * shape["cols"]


def mm(m, k, n, **kw):
    return Op(kind="matmul", name="mm", m=m, k=k, n=n, **kw)


def test_cache_round_trip_second_instance_does_not_call_the_timer(tmp_path):
    t1 = CountingTimer()
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t1, lnc=1)
    got = a.time(mm(512, 2048, 512))
    assert got.how == "simulated" and t1.calls == 1
    assert got.seconds == pytest.approx(1e-9 * (1000 + 512 * 2048 * 512 / 1e3))
    a.time(mm(512, 2048, 512))
    assert t1.calls == 1                       # in memory
    t2 = CountingTimer()
    b = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t2, lnc=1)
    assert b.time(mm(512, 2048, 512)).seconds == got.seconds
    assert t2.calls == 0                       # read from disk
    c = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=None, lnc=1)
    assert c.time(mm(512, 2048, 512)).seconds == got.seconds   # no timer needed on a hit


def test_batch_repeats_multiply(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1)
    one = a.time(mm(128, 128, 128)).seconds
    assert a.time(mm(128, 128, 128, batch=8)).seconds == pytest.approx(8 * one)


def test_log_slope_extrapolation_from_a_grid_override(tmp_path):
    grids = {"matmul": {"dtypes": ["bfloat16"], "axes": [
        {"name": "m", "values": [128, 512], "above": 2.0}, {"name": "k", "values": [128]},
        {"name": "n", "values": [128]}]}}
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1, grids=grids)
    t512 = 1e-9 * (1000 + 512 * 128 * 128 / 1e3)
    assert a.time(mm(1024, 128, 128)).seconds == pytest.approx(t512 * 2 ** 2)   # (1024/512)^2
    with pytest.raises(TrnsimError):
        SimulatedOpCosts("trn2", cache_dir=str(tmp_path), grids={"matmul": {"axes": [
            {"name": "m", "values": [128], "above": "cubic"}]}})


def test_interpolation_between_two_grid_points_is_log_log(tmp_path):
    t = CountingTimer()
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t, lnc=1)
    got = a.time(mm(1024, 512, 512))           # m=1024 lies between grid points 512 and 2048
    t512 = 1e-9 * (1000 + 512 * 512 * 512 / 1e3)
    t2048 = 1e-9 * (1000 + 2048 * 512 * 512 / 1e3)
    # log2(1024) is halfway between log2(512) and log2(2048): the geometric mean
    assert got.how == "interpolated"
    assert got.seconds == pytest.approx(math.sqrt(t512 * t2048), rel=1e-12)
    assert t.calls == 2


def test_extrapolation_above_and_below_the_grid(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1)
    top = 1e-9 * (1000 + 8192 * 128 * 128 / 1e3)
    got = a.time(mm(32768, 128, 128))
    assert got.seconds == pytest.approx(4 * top) and got.how == "interpolated"  # slope 1 past 8192
    low = 1e-9 * (1000 + 16 * 128 * 128 / 1e3)
    got = a.time(mm(4, 128, 128))
    assert got.seconds == pytest.approx(low) and got.how == "interpolated"  # slope 0 under 16


def test_linear_extension_is_exact_for_a_multi_affine_timer(tmp_path):
    grids = {"matmul": {"dtypes": ["bfloat16"], "axes": [
        {"name": ax, "values": [128, 512], "above": "linear"} for ax in ("m", "k", "n")]}}
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1, grids=grids)
    # the timer is 1e-9 * (1000 + m*k*n/1e3): affine in each dim, so extending the last interval of
    # every axis at once reproduces it exactly
    assert a.time(mm(4096, 2048, 1024)).seconds == pytest.approx(
        1e-9 * (1000 + 4096 * 2048 * 1024 / 1e3), rel=1e-9)


def test_log_slope_extrapolation_from_a_grid_override(tmp_path):
    grids = {"matmul": {"dtypes": ["bfloat16"], "axes": [
        {"name": "m", "values": [128, 512], "above": 2.0}, {"name": "k", "values": [128]},
        {"name": "n", "values": [128]}]}}
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1, grids=grids)
    t512 = 1e-9 * (1000 + 512 * 128 * 128 / 1e3)
    assert a.time(mm(1024, 128, 128)).seconds == pytest.approx(t512 * 2 ** 2)   # (1024/512)^2
    with pytest.raises(TrnsimError):
        SimulatedOpCosts("trn2", cache_dir=str(tmp_path), grids={"matmul": {"axes": [
            {"name": "m", "values": [128], "above": "cubic"}]}})


def test_interpolation_between_two_grid_points_is_log_log(tmp_path):
    t = CountingTimer()
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t, lnc=1)
    got = a.time(mm(1024, 512, 512))           # m=1024 lies between grid points 512 and 2048
    t512 = 1e-9 * (1000 + 512 * 512 * 512 / 1e3)
    t2048 = 1e-9 * (1000 + 2048 * 512 * 512 / 1e3)
    # log2(1024) is halfway between log2(512) and log2(2048): the geometric mean
    assert got.how == "interpolated"
    assert got.seconds == pytest.approx(math.sqrt(t512 * t2048), rel=1e-12)
    assert t.calls == 2


def test_lnc2_splits_the_op_over_two_physical_cores(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=2)
    # n=1024 >= m: n is split, each physical core does [512, 512] x [512, 512]
    assert a.time(mm(512, 512, 1024)).seconds == pytest.approx(1e-9 * (1000 + 512 * 512 * 512 / 1e3))
    # 8 repeats: 4 per core
    assert a.time(mm(128, 128, 128, batch=8)).seconds == pytest.approx(4 * 1e-9 * (1000 + 128 ** 3 / 1e3))


def test_hardware_file_changes_the_key(tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text('[v3.clocks]\ntensor_hz = { value = 1.0e9, source = "choice: test" }\n')
    t = CountingTimer()
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t, lnc=1)
    b = SimulatedOpCosts("trn2", hardware_file=str(hw), cache_dir=str(tmp_path), timer=t, lnc=1)
    assert a.scope != b.scope
    a.time(mm(128, 128, 128))
    b.time(mm(128, 128, 128))
    assert t.calls == 2
    hw.write_text('[v3.clocks]\ntensor_hz = { value = 2.0e9, source = "choice: test" }\n')
    c = SimulatedOpCosts("trn2", hardware_file=str(hw), cache_dir=str(tmp_path), timer=t, lnc=1)
    assert c.scope not in (a.scope, b.scope)   # the file's content, not its name, is hashed
    d = SimulatedOpCosts("trn1", cache_dir=str(tmp_path), timer=t, lnc=1)
    assert d.scope != a.scope


def test_kernel_version_changes_the_key(tmp_path):
    t = CountingTimer()
    SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t, lnc=1).time(mm(128, 128, 128))
    t2 = CountingTimer()
    t2.versions = {"matmul": 4}
    SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t2, lnc=1).time(mm(128, 128, 128))
    assert t2.calls == 1


def test_no_timer_raises_with_a_hint(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), lnc=1)
    with pytest.raises(TrnsimError) as e:
        a.time(mm(128, 128, 128))
    assert e.value.rule == "opcost-timer" and "time_reference" in e.value.hint


def test_bad_ops_raise_trnsim_errors(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1)
    with pytest.raises(TrnsimError) as e:
        a.time(mm(0, 128, 128))
    assert e.value.rule == "opcost-shape" and e.value.value == 0
    with pytest.raises(TrnsimError) as e:
        a.time(Op(kind="conv", name="c"))
    assert e.value.rule == "op-kind"
    with pytest.raises(TrnsimError):
        a.time(mm(128, 128, 128, dtype="int4"))


def test_ops_without_a_reference_kernel_use_the_roofline(tmp_path):
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=CountingTimer(), lnc=1)
    got = a.time(Op(kind="embedding", name="emb", rows=4096, cols=4096, bytes=32e6))
    assert got.how == "roofline"


def test_warm_builds_every_grid_point_once(tmp_path):
    t = CountingTimer()
    grids = {"add": {"dtypes": ["bfloat16"], "axes": [{"name": "rows", "values": [128, 1024]},
                                                      {"name": "cols", "values": [512, 2048, 8192]}]}}
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=t, lnc=1, grids=grids)
    seen = []
    assert a.warm(progress=lambda d, n, label: seen.append((d, n)), kernels=["add"]) == 6
    assert seen[-1] == (6, 6) and t.calls == 6
    assert a.warm(kernels=["add"]) == 0
    b = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), lnc=1, grids=grids)
    assert b.warm(kernels=["add"]) == 0          # nothing to simulate: no timer needed
    got = a.time(Op(kind="elementwise", name="residual_add", rows=256, cols=1024))
    # log-log between (128, 512), (128, 2048), (1024, 512), (1024, 2048) of rows*cols: exact for a
    # power law
    assert got.seconds == pytest.approx(1e-9 * 256 * 1024)


def fake_timer(kernel, shape, dtype, target, hardware_file=None):
    """rows * cols nanoseconds (module level, so a process pool can pickle it)."""
    return 1e-9 * shape["rows"] * shape["cols"]


def test_parallel_warm_stores_every_point(tmp_path):
    grids = {"add": {"dtypes": ["bfloat16"], "axes": [{"name": "rows", "values": [128, 1024]},
                                                      {"name": "cols", "values": [512, 2048]}]}}
    a = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=fake_timer, lnc=1, grids=grids)
    assert a.warm(kernels=["add"], workers=2) == 4
    b = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), lnc=1, grids=grids)
    assert b.time(Op(kind="elementwise", name="add", rows=1024, cols=512)).seconds == \
        pytest.approx(1e-9 * 1024 * 512)
    with pytest.raises(TrnsimError):
        SimulatedOpCosts("trn2", cache_dir=str(tmp_path / "empty"), lnc=1, grids=grids).warm(kernels=["add"])


def _writer(cache_dir, n):
    a = SimulatedOpCosts("trn2", cache_dir=cache_dir, timer=CountingTimer(), lnc=1)
    for m in (16, 128, 512, 2048):
        for k in (128, 512):
            a.time(mm(m, k, 128))
    return a.timer_calls


def test_concurrent_writers_one_row_per_key(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        calls = pool.starmap(_writer, [(str(tmp_path), 0), (str(tmp_path), 1)])
    assert all(c <= 8 for c in calls)
    con = sqlite3.connect(os.path.join(str(tmp_path), DB_NAME))
    rows = con.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM op_times").fetchone()
    assert rows == (8, 8)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
