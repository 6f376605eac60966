"""Simulated op costs from the SQLite cache, shared by the planner's worker processes: two workers
filling a cold cache at once give the same ranking as one worker reading it warm."""
import functools

from trnsim.model.opcost import SimulatedOpCosts
from trnsim.model.opcost.cache import CostCache
from trnsim.plan import plan


def fake_timer(kernel, shape, dtype, target, hardware_file=None):
    """A deterministic stand-in for the kernel simulator: seconds grow with the shape."""
    return 1e-6 * (1.0 + sum(shape.values()) / 512.0)


def costs_in(cache_dir, target, lnc, hardware_file=None):
    """Simulated op costs backed by a test's own cache directory."""
    return SimulatedOpCosts(target, hardware_file=hardware_file, cache_dir=cache_dir, timer=fake_timer, lnc=lnc)


def test_workers_share_the_op_cost_cache(tmp_path):
    kw = dict(model="llama-3.1-8b", system="trn1.32xlarge", seq=2048, global_batch=64, top=10,
              space=dict(micro_batch=[1, 2], recompute=["full"], cp=[1]),
              costs=functools.partial(costs_in, str(tmp_path)))
    cold = plan(**kw, workers=2)                 # both workers simulate and insert rows concurrently
    rows = CostCache(str(tmp_path)).count()
    assert rows > 0
    warm = plan(**kw, workers=1)                 # reads what they wrote, simulates nothing new
    assert CostCache(str(tmp_path)).count() == rows
    assert [(b.label, b.score) for b in cold.best] == [(b.label, b.score) for b in warm.best]
    assert "injected" in cold.notes[0]


class _BrokenCache:
    """Op costs whose cache cannot be opened."""

    def time(self, op):
        from trnsim.errors import ConfigError
        raise ConfigError("cannot open the op-cost cache /nowhere: database is locked", rule="opcost-cache")


def broken_costs(target, lnc, hardware_file=None):
    return _BrokenCache()


def test_a_cache_failure_stops_the_plan_instead_of_dropping_configs():
    import pytest
    from trnsim.errors import TrnsimError
    with pytest.raises(TrnsimError) as e:
        plan(model="llama-3.1-8b", system="trn1.32xlarge", seq=2048, global_batch=64, top=3,
             space=dict(micro_batch=[1], recompute=["full"], cp=[1]), costs=broken_costs, workers=1)
    assert e.value.rule == "opcost-cache"
