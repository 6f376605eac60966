"""Timing with the compiler's physical SBUF placement (nki/core/placement.py, deps.physical): a
tile that reuses the bytes of the previous iteration's tile waits for its last reader, in both
dependency backends; with room to spare nothing changes; private keeps logical tiles."""
import os
import sys

import numpy as np
import pytest

from trnsim.options import Options
from trnsim.timing import native
from trnsim.timing.costs import CostModel
from trnsim.timing.deps import dependencies, dependencies_py
from trnsim.timing.estimate import _core_and_chip, estimate_run
from trnsim.timing.scheduler import schedule, schedule_py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nki"))
from test_placement import lru_file  # noqa: E402


def _copy_loop(n):
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(n):
            t = nl.load(x[i])
            nl.store(out[i], value=t)
        return out
    return k


def _run(n, free, hw=None, ff="off"):
    x = np.zeros((n, 128, free), np.float32)
    return _copy_loop(n).run(x, options=Options(target="trn1", timing_only=True, fast_forward=ff,
                                                 hardware_file=hw))


def test_large_tiles_serialize_iterations(tmp_path):
    # 100 KiB per partition per tile: two never fit the 192 KiB partition, so every iteration's
    # tile takes offset 0 and its load waits for the previous store (write-after-read): the latency
    # is the plain sum of the 8 transfers, each its fixed latency plus bytes / rate
    n = 8
    lru = _run(n, 25600, lru_file(tmp_path))
    priv = _run(n, 25600)
    model = CostModel(*_core_and_chip("trn1", None))
    ins = list(lru.traces[0].instructions)
    assert [i.opcode for i in ins] == ["dma_copy"] * (2 * n)
    serial = sum(model.dma(i).fixed_ns + model.dma(i).bytes / model.dma(i).rate_bytes_per_ns
                 for i in ins)
    tl = estimate_run(lru).cores[0].timeline
    assert tl.latency_ns == pytest.approx(serial, rel=1e-12)
    fixed = model.dma(ins[0]).fixed_ns   # a transfer's start is after its fixed latency
    for k in range(1, n):   # load k is issued after store k-1 ends
        assert tl.start[2 * k] >= tl.end[2 * k - 1] + fixed
    # private: each tile its own bytes, a load's fixed latency overlaps the previous store
    tp = estimate_run(priv).cores[0].timeline
    assert all(tp.start[2 * k] < tp.end[2 * k - 1] + fixed for k in range(1, n))
    assert tp.latency_ns < serial


def test_small_tiles_same_timeline_under_both_policies(tmp_path):
    # 2 KiB tiles: 200 iterations wrap around the 192 KiB partition, reusing bytes released ~96
    # iterations earlier, a dependency long satisfied: the timelines are identical
    n = 200
    lru = _run(n, 512, lru_file(tmp_path))
    priv = _run(n, 512)
    flat = lru.traces[0].meta["sbuf_placement"]
    offs = [flat[k + 2] for k in range(0, len(flat), 3)]
    assert len(offs) == n and min(offs) == 0 and len(set(offs)) == 196608 // 2048
    a = estimate_run(lru).cores[0].timeline
    b = estimate_run(priv).cores[0].timeline
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


@pytest.mark.skipif(not native.available(), reason="C extension not built")
def test_backends_apply_the_same_map(tmp_path):
    tr = _run(6, 16384, lru_file(tmp_path)).traces[0]   # 64 KiB tiles: three rotate
    model = CostModel(*_core_and_chip("trn1", None))
    py = dependencies_py(tr, model.reorder_engines)
    c = dependencies(tr, "native", model.reorder_engines)
    assert [tuple(sorted(d)) for d in py] == [tuple(sorted(d)) for d in c]
    # the load of iteration 3 reuses iteration 0's bytes: it waits for store 0 (instruction 1)
    assert 1 in py[6]
    a, b = schedule(tr, model, backend="native"), schedule_py(tr, model)
    assert np.allclose(a.start, b.start) and np.allclose(a.end, b.end)


def _exp_loop(n):
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(n):
            t = nl.load(x[i])
            nl.store(out[i], value=nl.exp(t))
        return out
    return k


@pytest.mark.parametrize("body,free", [(_copy_loop, 25600), (_exp_loop, 16384), (_exp_loop, 8192)])
def test_fast_forwarded_run_matches_full_run(tmp_path, body, free):
    # the tiles of synthesized iterations get the placement a full run gives them
    hw = lru_file(tmp_path)
    x = np.zeros((12, 128, free), np.float32)
    full, ff = (body(12).run(x, options=Options(target="trn1", timing_only=True, fast_forward=f,
                                                 hardware_file=hw)) for f in ("off", "auto"))
    assert ff.traces[0].instructions.blocks, "expected synthesized iterations"
    assert len(full.traces[0].meta["sbuf_placement"]) == len(ff.traces[0].meta["sbuf_placement"])
    a, b = estimate_run(full).cores[0].timeline, estimate_run(ff).cores[0].timeline
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


def test_nested_fast_forwarded_loops_match_full_run(tmp_path):
    # inner blocks inside the recorded outer iterations, and an outer block whose template holds
    # inner synthesized tiles: every one gets the full run's placement
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(6):
            for j in nl.affine_range(6):
                t = nl.load(x[i, j])
                nl.store(out[i, j], value=nl.exp(t))
        return out

    hw = lru_file(tmp_path)
    x = np.zeros((6, 6, 128, 12000), np.float32)
    full, ff = (k.run(x, options=Options(target="trn1", timing_only=True, fast_forward=f,
                                         hardware_file=hw)) for f in ("off", "auto"))
    assert len(ff.traces[0].instructions.blocks) > 1
    a, b = estimate_run(full).cores[0].timeline, estimate_run(ff).cores[0].timeline
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


def _site_file(tmp_path, n):
    p = tmp_path / f"site{n}.toml"
    p.write_text(f"""
[cores.v2.sbuf]
placement = {{ value = "site_buffers", source = "test" }}
loop_buffers = {{ value = {n}, source = "test" }}
""")
    return str(p)


def test_one_buffer_per_site_serializes_a_small_copy_loop(tmp_path):
    # 2 KiB tiles fit the partition 96 times over, so reuse_lru would rotate them; one copy per
    # allocation site (placement site_buffers, loop_buffers 1) makes load k wait for store k-1:
    # the latency is the plain sum of the 16 transfers, as in the serialized case above
    n = 8
    one = _run(n, 512, _site_file(tmp_path, 1))
    model = CostModel(*_core_and_chip("trn1", None))
    ins = list(one.traces[0].instructions)
    serial = sum(model.dma(i).fixed_ns + model.dma(i).bytes / model.dma(i).rate_bytes_per_ns
                 for i in ins)
    assert estimate_run(one).latency_ns == pytest.approx(serial, rel=1e-12)


def test_two_buffers_per_site_let_a_load_overlap_the_previous_store(tmp_path):
    # two copies: load k waits only for store k-2, so the run is faster than one copy's serial
    # sum and no faster than private bytes (unlimited copies)
    n = 8
    one = estimate_run(_run(n, 512, _site_file(tmp_path, 1))).latency_ns
    two_run = _run(n, 512, _site_file(tmp_path, 2))
    two = estimate_run(two_run).latency_ns
    priv = estimate_run(_run(n, 512)).latency_ns
    assert priv <= two < one
    tl = estimate_run(two_run).cores[0].timeline
    for k in range(2, n):   # load k is issued after store k-2 ends (its bytes' last reader)
        assert tl.start[2 * k] >= tl.end[2 * (k - 2) + 1]
