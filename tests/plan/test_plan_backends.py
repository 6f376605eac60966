"""Same results from every backend: in-process, a local process pool, and a local Ray."""
import sys

import pytest

from trnsim.plan import PlanError, plan

CASE = dict(model="llama-3.1-8b", system="trn1.32xlarge", count=[1, 2], seq=2048, global_batch=64, top=10,
            space=dict(micro_batch=[1, 2], recompute=["none", "full"]))


def _ranking(r):
    return [(b.label, b.score) for b in r.best]


@pytest.fixture(scope="module")
def serial():
    return plan(**CASE, workers=1)


def test_the_local_pool_returns_the_serial_ranking(serial):
    pooled = plan(**CASE, workers=2)
    assert pooled.workers == 2
    assert _ranking(pooled) == _ranking(serial)
    assert pooled.drop_counts() == serial.drop_counts()
    assert [r.config for r in pooled.rows] == [r.config for r in serial.rows]


def test_progress_reaches_the_total(serial):
    seen = []
    plan(**CASE, workers=2, progress=lambda done, total, label: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] == serial.memory_checked
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_ray_backend_returns_the_same_best_config(serial, monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    started = not ray.is_initialized()
    try:
        on_ray = plan(**CASE, backend="ray", workers=2)
    finally:
        if started:
            ray.shutdown()
    assert on_ray.backend == "ray"
    assert on_ray.best[0].label == serial.best[0].label
    assert _ranking(on_ray) == _ranking(serial)


def test_ray_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)     # import ray -> ImportError
    with pytest.raises(PlanError) as ei:
        plan(**CASE, backend="ray", workers=2)
    assert "pip install 'trnsim[ray]'" in ei.value.hint


def test_an_unreachable_ray_address_fails_fast(monkeypatch):
    pytest.importorskip("ray")
    import socket
    with socket.socket() as s:        # a port nobody listens on: bind, then close
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    import ray
    if ray.is_initialized():
        pytest.skip("a Ray session is already running in this process")
    with pytest.raises(PlanError) as ei:
        plan(**CASE, backend="ray", workers=2)
    assert ei.value.rule == "plan-backend" and str(port) in ei.value.message
