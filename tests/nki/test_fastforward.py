"""Loop fast-forward in timing-only runs: the synthesized trace must be the trace of running every
iteration (the reference is the same kernel run with fast-forward off), instruction by instruction,
with tensors compared up to renaming."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import OutOfBoundsError
from trnsim.options import Options
from trnsim.timing import estimate_run

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))


def _legacy():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    return nki, nl, nisa


def _canon(trace):
    """Instructions with tensor ids renamed by first appearance (synthesized tiles get new ids)."""
    ids = {}
    out = []
    for pos, ins in enumerate(trace):
        regs = tuple((ids.setdefault(r.tensor, len(ids)), r.memory, r.partition, r.partitions,
                      r.start, r.stop, r.elements, r.dtype, r.contiguous, r.indirect)
                     for r in ins.reads + ins.writes)
        out.append((pos, ins.index, ins.engine, ins.opcode, ins.partitions, ins.free,
                    ins.dtype_in, ins.dtype_out, ins.attrs, ins.source.line, len(ins.reads), regs))
    return out


def _both(kernel, *args, target="trn1", **kw):
    runs = {}
    for ff in ("off", "auto"):
        runs[ff] = kernel.run(*args, **kw, options=Options(target=target, timing_only=True,
                                                            fast_forward=ff))
    return runs["off"], runs["auto"]


@pytest.mark.parametrize("name", ["trn1_tiled", "trn1_hoist_load", "trn1_block_free_dims",
                                  "trn1_fully_optimized"])
def test_ladder_kernels_identical_with_fast_forward(name):
    _legacy()
    import ladder_kernels
    k = getattr(ladder_kernels, name)
    a = np.zeros((1024, 1024), ml_dtypes.bfloat16)
    b = np.zeros((1024, 2048), ml_dtypes.bfloat16)
    kw = dict(BM=1, BN=1, BK=1) if name == "trn1_fully_optimized" else {}
    off, ff = _both(k, a, b, **kw)
    assert ff.traces[0].instructions.blocks, "expected synthesized iterations"
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    assert estimate_run(off).latency_ns == estimate_run(ff).latency_ns


def test_partial_last_tile_keeps_the_middle_synthesized():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        n = x.shape[0]
        for i in nl.affine_range((n + 127) // 128):
            ip, jf = nl.mgrid[0:128, 0:64]
            t = nl.load(x[i * 128 + ip, jf], mask=(i * 128 + ip < n))
            u = nl.exp(t, mask=(i * 128 + ip < n))
            nl.store(out[i * 128 + ip, jf], value=u, mask=(i * 128 + ip < n))
        return out

    x = np.zeros((128 * 7 + 40, 64), np.float32)
    off, ff = _both(k, x)
    # 8 tiles, the last partial: 0-2 probed, 7 differs from the prediction, 6 does not, so
    # 3-5 are synthesized and 6, 7 run (in program order after the block)
    blocks = ff.traces[0].instructions.blocks
    assert [b.count for b in blocks] == [3]
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    # the partial (masked, so indirect) tile is the last one in program order
    loads = [ins for ins in ff.traces[0] if ins.opcode == "dma_copy" and ins.reads[0].name == "x"]
    assert [ins.reads[0].indirect for ins in loads] == [False] * 7 + [True]


def test_last_two_iterations_special_run_the_middle_in_program_order():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(9):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            if i >= 7:  # the last two iterations do more: nothing is synthesized
                t = nl.exp(t)
            acc[...] = nl.add(acc, t)
        nl.store(out, value=acc)
        return out

    off, ff = _both(k, np.zeros((9 * 128, 64), np.float32))
    assert not ff.traces[0].instructions.blocks
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    assert [ins.opcode for ins in ff.traces[0]].count("activation") == 2
    assert estimate_run(off).latency_ns == estimate_run(ff).latency_ns


def test_diagonal_tile_keeps_the_inner_loop_synthesized():
    """A triangular loop nest (causal attention's shape): inner loop i runs i + 1 tiles and its
    last one, on the diagonal, does more; so the last iteration differs from the prediction, the
    one before it does not, and the tiles in between are synthesized."""
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(8):
            for j in nl.sequential_range(i + 1):
                t = nl.load(x[j * 128:(j + 1) * 128, :])
                if j == i:
                    t = nl.exp(t)
                acc[...] = nl.add(acc, t)
        nl.store(out, value=acc)
        return out

    off, ff = _both(k, np.zeros((8 * 128, 64), np.float32), target="trn2")
    # inner loops of 6, 7, 8 tiles: 0-2 probed, the last two run, 1, 2, 3 synthesized
    assert [b.count for b in ff.traces[0].instructions.blocks] == [1, 2, 3]
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    assert estimate_run(off).latency_ns == estimate_run(ff).latency_ns


def test_iteration_dependent_python_branch_is_not_synthesized():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(8):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            if i % 2 == 0:
                acc[...] = nl.add(acc, t)
            else:
                acc[...] = nl.subtract(acc, nl.exp(t))
        nl.store(out, value=acc)
        return out

    off, ff = _both(k, np.zeros((1024, 64), np.float32))
    assert not ff.traces[0].instructions.blocks
    assert _canon(off.traces[0]) == _canon(ff.traces[0])


def test_a_first_iteration_prologue_is_skipped_and_the_rest_synthesized():
    """Iteration 0 issues an extra instruction (here an ``if i == 0`` branch; in practice the
    partition-broadcast copy of a loop-invariant row that later iterations share): iterations
    1-3 are the template, 4 .. n-2 are synthesized, and the trace is the full run's."""
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x, row):
        out = nl.ndarray((16, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        r = nl.load(row)
        for i in nl.affine_range(16):
            t = nl.load(x[i])
            if i == 0:
                t = nl.exp(t)
            nl.store(out[i], value=nisa.tensor_tensor(t, r.broadcast_to((128, 64)),
                                                      op=nl.multiply))
        return out

    x, row = np.zeros((16, 128, 64), np.float32), np.zeros((1, 64), np.float32)
    off, ff = _both(k, x, row, target="trn2")
    blocks = ff.traces[0].instructions.blocks
    assert len(blocks) == 1
    # 16 iterations: 0-3 and 15 run, 4-14 synthesized (11), each load + tensor_tensor + store
    assert (blocks[0].k0, blocks[0].count, len(blocks[0].template)) == (3, 11, 3)
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    # the row is broadcast once (iteration 0) in both runs
    assert sum(1 for i in ff.traces[0] if i.opcode == "partition_broadcast") == 1


def test_a_prologue_is_not_looked_for_in_a_five_iteration_loop():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((5, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(5):
            t = nl.load(x[i])
            if i == 0:
                t = nl.exp(t)
            nl.store(out[i], value=t)
        return out

    off, ff = _both(k, np.zeros((5, 128, 64), np.float32))
    assert not ff.traces[0].instructions.blocks
    assert _canon(off.traces[0]) == _canon(ff.traces[0])


def test_loop_carried_tile_is_not_synthesized():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        for i in nl.affine_range(10):
            t = nl.exp(t)   # each iteration reads the tile the previous one made
        nl.store(out, value=t)
        return out

    off, ff = _both(k, np.zeros((128, 32), np.float32))
    assert not ff.traces[0].instructions.blocks
    assert _canon(off.traces[0]) == _canon(ff.traces[0])


def test_result_of_last_iteration_assigned_after_the_loop():
    """A tile made in the last iteration and used after the loop: its producing instruction moved
    when the middle iterations were inserted before it."""
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(12):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            r = nl.exp(t)
        acc[...] = r
        nl.store(out, value=acc)
        return out

    off, ff = _both(k, np.zeros((128 * 12, 32), np.float32))
    assert ff.traces[0].instructions.blocks
    assert _canon(off.traces[0]) == _canon(ff.traces[0])
    tr = ff.traces[0]
    exps = [ins for ins in tr if ins.opcode == "activation"]
    (cp,) = [ins for ins in tr if ins.opcode == "tensor_copy"]
    assert len(exps) == 12 and cp.reads[0] == exps[-1].writes[0] and cp.index > exps[-1].index
    assert [ins.index for ins in tr] == list(range(len(tr)))


def test_nested_loops_outer_iterations_synthesized():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            for j in nl.affine_range(x.shape[1] // 64):
                t = nl.load(x[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64])
                nl.store(out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], value=nl.exp(t))
        return out

    x = np.zeros((128 * 9, 64 * 7), np.float32)
    off, ff = _both(k, x)
    tr = ff.traces[0]
    assert len(tr) == 9 * 7 * 3
    # the outer loop's middle iterations are one block holding whole inner loops
    assert max(b.n for b in tr.instructions.blocks) == (9 - 4) * 7 * 3
    assert _canon(off.traces[0]) == _canon(tr)
    assert estimate_run(off).latency_ns == estimate_run(ff).latency_ns


def test_out_of_bounds_in_last_iteration_still_raised():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(9):  # one tile too many
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            nl.store(out, value=t)
        return out

    with pytest.raises(OutOfBoundsError) as e:
        k.run(np.zeros((128 * 8, 64), np.float32),
              options=Options(target="trn1", timing_only=True))
    assert "test_fastforward.py" in str(e.value)


def test_functional_runs_never_fast_forward():
    nki, nl, nisa = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.exp(nl.load(x[i * 128:(i + 1) * 128, :])))
        return out

    x = np.random.default_rng(0).standard_normal((128 * 8, 16)).astype(np.float32)
    r = k.run(x, options=Options(target="trn1"))
    assert not r.traces[0].instructions.blocks
    np.testing.assert_allclose(r.outputs, np.exp(x), rtol=1e-6)


def test_fast_forward_option_from_environment():
    assert Options.from_env({"TRNSIM_FAST_FORWARD": "0"}).fast_forward == "off"
    assert Options.from_env({"TRNSIM_FAST_FORWARD": "all"}).fast_forward == "all"
    assert Options.from_env({}).fast_forward == "auto"
    from trnsim.errors import ConfigError
    with pytest.raises(ConfigError):
        Options.from_env({"TRNSIM_FAST_FORWARD": "sometimes"})


@pytest.mark.parametrize("name,synthesized", [("v2_tiled", True), ("v3_hoisted", True),
                                              ("v4_blocked_free", False)])
def test_new_api_loops_with_fast_forward_all(name, synthesized):
    """New-API loops are Python unrolls; with TRNSIM_FAST_FORWARD=all they are fast-forwarded
    unless the body's tiles escape into Python state (v3/v4 keep lists of tiles used after the
    loop: those loops must run every iteration)."""
    _legacy()
    import ladder_kernels_trn2
    k = getattr(ladder_kernels_trn2, name)
    a = np.zeros((1024, 1024), np.float32)
    b = np.zeros((1024, 2048), np.float32)
    runs = {ff: k.run(a, b, options=Options(target="trn2", timing_only=True, fast_forward=ff))
            for ff in ("off", "all")}
    assert bool(runs["all"].traces[0].instructions.blocks) == synthesized
    assert _canon(runs["off"].traces[0]) == _canon(runs["all"].traces[0])
    # the default mode leaves new-API loops alone
    auto = k.run(a, b, options=Options(target="trn2", timing_only=True))
    assert not auto.traces[0].instructions.blocks
