"""The op-cost cache trusts nothing it reads: impossible times (negative, zero, huge, NaN) are dropped
and simulated again, a damaged file is moved aside and rebuilt; each with a warning naming the file."""
import os
import sqlite3

import pytest

from trnsim.model.opcost import SimulatedOpCosts
from trnsim.model.opcost.cache import DB_NAME, CacheWarning, CostCache, max_seconds

SHAPE = {"m": 128, "k": 128, "n": 512}


def timer(kernel, shape, dtype, target, hardware_file):
    """A stand-in for the simulator: 1 ns per output element (a hand-checkable time)."""
    return shape["m"] * shape["n"] * 1e-9


def _poison(cache_dir, seconds):
    """Overwrite every cached time with ``seconds``, as a damaged or tampered file would hold."""
    c = sqlite3.connect(os.path.join(cache_dir, DB_NAME))
    c.execute("UPDATE op_times SET seconds = ?", (seconds,))
    c.commit()
    c.close()


@pytest.mark.parametrize("bad", [-1.0, 0.0, 1e30, "nan", "garbage", float("inf")])  # SQLite keeps NaN as text
def test_impossible_cached_times_are_dropped_and_simulated_again(tmp_path, bad):
    d = str(tmp_path)
    first = SimulatedOpCosts("trn2", cache_dir=d, timer=timer)
    assert first.point_time("matmul", SHAPE, "bfloat16") == pytest.approx(128 * 512 * 1e-9)
    first.cache.close()
    _poison(d, bad)
    again = SimulatedOpCosts("trn2", cache_dir=d, timer=timer)
    with pytest.warns(CacheWarning, match=DB_NAME):
        got = again.point_time("matmul", SHAPE, "bfloat16")
    assert got == pytest.approx(128 * 512 * 1e-9)   # the simulated time, not the poisoned one
    assert again.timer_calls == 1
    # the fresh row replaced the bad one: a third reader gets it without simulating
    third = SimulatedOpCosts("trn2", cache_dir=d, timer=timer)
    assert third.point_time("matmul", SHAPE, "bfloat16") == pytest.approx(128 * 512 * 1e-9)
    assert third.timer_calls == 0


def test_get_refuses_an_impossible_row(tmp_path):
    c = CostCache(str(tmp_path))
    c.put("k", "s", "matmul", 1, "{}", "bf16", "trn2", "h", 1e-3)
    c.close()
    _poison(str(tmp_path), max_seconds() * 10)
    c = CostCache(str(tmp_path))
    with pytest.warns(CacheWarning):
        assert c.get("k") is None
    assert c.count() == 0


def test_put_never_stores_an_impossible_time(tmp_path):
    c = CostCache(str(tmp_path))
    c.put("k", "s", "matmul", 1, "{}", "bf16", "trn2", "h", float("nan"))
    assert c.count() == 0


@pytest.mark.parametrize("garbage", [b"not a database at all" * 100, b"SQLite format 3\x00" + os.urandom(8192)])
def test_corrupt_cache_file_is_rebuilt_with_a_warning(tmp_path, garbage):
    d = str(tmp_path)
    with open(os.path.join(d, DB_NAME), "wb") as f:
        f.write(garbage)
    costs = SimulatedOpCosts("trn2", cache_dir=d, timer=timer)
    with pytest.warns(CacheWarning, match=os.path.join(d, DB_NAME)):
        got = costs.point_time("matmul", SHAPE, "bfloat16")
    assert got == pytest.approx(128 * 512 * 1e-9)
    assert any(n.startswith(DB_NAME + ".corrupt-") for n in os.listdir(d))   # kept aside
    assert CostCache(d).count() == 1                                        # the rebuilt file works
