"""Race detection (core/races.py): legal patterns raise nothing in strict mode and compute what numpy
computes; racy ones are reported with both lines; the sweep agrees with a brute-force pair check.

The racy kernels themselves live in tests/nki/broken/race_*.py (each with its expected report)."""
import itertools
import warnings

import numpy as np
import pytest

import trnsim.frontends.nki as nnki
import trnsim.frontends.nki_legacy as nki
from trnsim.errors import RaceError, RaceWarning, TrnsimError
from trnsim.frontends.nki_legacy import isa as nisa
from trnsim.frontends.nki_legacy import language as nl
from trnsim.ir.trace import Instruction, Region
from trnsim.nki.core import races
from trnsim.nki.harness import as_kernel
from trnsim.options import Options
from trnsim.source import SourceLoc

nnl = nnki.language
nnisa = nnki.isa


def strict_run(kernel, *args, **opts):
    """Strict mode, every warning an error: a correct kernel must pass; returns the RunResult."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return as_kernel(kernel).run(*args, options=Options(strict=True, **opts))
        except TrnsimError as e:  # pragma: no cover - what this file guards against
            pytest.fail(f"false alarm: {type(e).__name__}: {e}")


def race_warnings(kernel, *args, **opts):
    """The RaceWarnings of a default (non-strict) run."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        as_kernel(kernel).run(*args, options=Options(**opts))
    return [w.message for w in rec if issubclass(w.category, RaceWarning)]


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- legal patterns: no report ---------------------------------------------------------------------

@nki.jit
def k_loop(a, b):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 128):
        ps += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
    nl.store(out, value=nl.copy(ps))
    return out


def test_k_loop_psum_accumulation_is_not_a_race():
    a, b = rnd(512, 128), rnd(512, 128, seed=1)
    out = strict_run(k_loop, a, b).outputs
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-3)


@nki.jit
def tiles_per_iteration(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)  # one per iteration
        t[...] = nl.load(x[i * 128:(i + 1) * 128, :])
        t[...] = nl.multiply(t, 2.0)
        nl.store(out[i * 128:(i + 1) * 128, :], value=t)
    return out


def test_tiles_allocated_in_the_body_and_disjoint_slices_are_not_races():
    x = rnd(512, 64)
    np.testing.assert_array_equal(strict_run(tiles_per_iteration, x).outputs, 2 * x)


@nki.jit
def carried_sequential(x):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    buf[:, 0:64] = nl.load(x[:, 0:64])
    for i in nl.sequential_range(1, 4):
        prev = nl.copy(buf[:, (i - 1) * 64:i * 64])
        buf[:, i * 64:(i + 1) * 64] = nl.add(prev, 1.0)
    nl.store(out, value=buf)
    return out


def test_sequential_range_carried_dependency_is_not_a_race():
    x = rnd(128, 256)
    want = np.concatenate([x[:, :64] + j for j in range(4)], axis=1)
    np.testing.assert_allclose(strict_run(carried_sequential, x).outputs, want, rtol=1e-6)


@nki.jit
def sbuf_reductions(x):
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    mx = nl.full((128, 64), -1e30, nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        acc += t                                                  # the docs' SBUF accumulation
        mx[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[i], dtype=nl.float32)
    nl.store(out[0], value=acc)
    nl.store(out[1], value=mx)
    return out


def test_sbuf_plus_equals_and_loop_reduce_are_not_races():
    x = rnd(512, 64)
    out = strict_run(sbuf_reductions, x).outputs
    np.testing.assert_allclose(out[0], x.reshape(4, 128, 64).sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[1], x.reshape(4, 128, 64).max(0))


@nki.jit
def psum_vector_accumulate(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 64), nl.float32, buffer=nl.psum)   # zeroed lazily, at its first use
    for i in nl.affine_range(4):
        ps += nl.multiply(nl.load(x[i * 128:(i + 1) * 128, :]), 3.0)
    nl.store(out, value=nl.copy(ps))
    return out


def test_psum_zeroed_before_the_loop_and_accumulated_with_plus_equals():
    x = rnd(512, 64)
    out = strict_run(psum_vector_accumulate, x).outputs
    np.testing.assert_allclose(out, 3 * x.reshape(4, 128, 64).sum(0), rtol=1e-5, atol=1e-5)


@nki.jit
def dma_accumulate(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    z = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    nl.store(out, value=z)
    for i in nl.affine_range(4):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out, src=t, dst_rmw_op=np.add)   # read-modify-write DMA: a reduction
    return out


def test_dma_read_modify_write_into_one_tile_is_not_a_race():
    x = rnd(512, 64)
    out = strict_run(dma_accumulate, x).outputs
    np.testing.assert_allclose(out, x.reshape(4, 128, 64).sum(0), rtol=1e-5, atol=1e-5)


@nki.jit
def spmd_disjoint(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(x[i * 128:(i + 1) * 128, :]))
    return out


def test_spmd_programs_on_disjoint_tiles_are_not_races():
    x = rnd(512, 64)
    np.testing.assert_array_equal(strict_run(spmd_disjoint[4], x).outputs, x)


@nnki.jit
def lnc_barrier_ordered(x):
    """Core 0 writes the output, both meet at a barrier, then core 1 overwrites it: ordered."""
    out = nnl.ndarray(x.shape, dtype=x.dtype, buffer=nnl.shared_hbm)
    t = nnl.ndarray(x.shape, dtype=x.dtype, buffer=nnl.sbuf)
    c = nnl.program_id(0)
    nnisa.dma_copy(dst=t, src=x)
    nnisa.tensor_scalar(dst=t, data=t, op0=nnl.add, operand0=float(c))
    if c == 0:
        nnisa.dma_copy(dst=out, src=t)
    nnisa.core_barrier(out, (0, 1))
    if c == 1:
        nnisa.dma_copy(dst=out, src=t)
    return out


def test_lnc_writes_separated_by_a_core_barrier_are_not_races():
    x = rnd(64, 16)
    np.testing.assert_array_equal(strict_run(lnc_barrier_ordered[2], x).outputs, x + 1)


def test_lnc_writes_in_the_same_epoch_race():
    @nnki.jit
    def k(x):
        out = nnl.ndarray(x.shape, dtype=x.dtype, buffer=nnl.shared_hbm)
        t = nnl.ndarray(x.shape, dtype=x.dtype, buffer=nnl.sbuf)
        nnisa.dma_copy(dst=t, src=x)
        nnisa.tensor_scalar(dst=t, data=t, op0=nnl.add, operand0=float(nnl.program_id(0)))
        nnisa.core_barrier(out, (0, 1))
        nnisa.dma_copy(dst=out, src=t)
        return out
    got = race_warnings(k[2], rnd(64, 16))
    assert len(got) == 1 and got[0].rule == "race-lnc"
    assert "after barrier 1" in str(got[0])


# -- reports ---------------------------------------------------------------------------------------

@nki.jit
def store_same_row(x):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        nl.store(out[0:1, :], value=nl.load(x[i:i + 1, :]))
    return out


def test_warning_carries_rule_both_sides_tensor_and_region():
    got = race_warnings(store_same_row, rnd(4, 64))
    assert len(got) == 1
    w = got[0]
    assert w.rule == "race-affine-range"
    (la, ra, a), (lb, rb, b) = w.first, w.second
    assert (la, ra, lb, rb) == ("iteration 0", "writes", "iteration 1", "writes")
    assert a.file == __file__ and a.line == b.line
    assert w.region == "rows [0, 1) bytes [0, 256)"   # one fp32 row of 64
    assert w.tensor


def test_strict_mode_from_environment_raises(monkeypatch):
    for var in ("TRNSIM_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRNSIM_STRICT", "1")
    with pytest.raises(RaceError) as ei:
        store_same_row(rnd(4, 64))
    assert ei.value.rule == "race-affine-range" and __file__ in str(ei.value)


def test_a_loop_run_many_times_reports_once():
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for j in nl.sequential_range(3):
            for i in nl.affine_range(2):
                nl.store(out[0:1, :], value=nl.load(x[i:i + 1, :]))
        return out
    assert len(race_warnings(k, rnd(2, 64))) == 1


def test_fast_forwarded_loop_is_checked_on_its_probed_iterations():
    # 32 iterations of a regular body: the timing-only run synthesizes the middle ones
    res_args = (rnd(32, 64),)
    got = race_warnings(store_same_row, *res_args, timing_only=True)
    assert len(got) == 1 and got[0].rule == "race-affine-range"
    with pytest.warns(RaceWarning):
        run = as_kernel(store_same_row).run(*res_args, options=Options(timing_only=True))
    assert run.traces[0].instructions.blocks, "the loop was not fast-forwarded"
    a, b = rnd(4096, 128), rnd(4096, 128, seed=1)
    assert strict_run(k_loop, a, b, timing_only=True).traces[0].instructions.blocks


# -- the sweep against a brute-force reference -------------------------------------------------------

_LOC = SourceLoc("k.py", 1, "k")


def _ins(idx, reads=(), writes=(), attrs=()):
    return Instruction(idx, "dma", "dma_copy", tuple(reads), tuple(writes), 1, 1, "float32",
                       "float32", tuple(attrs), SourceLoc("k.py", 100 + idx, "k"))


def _reg(p, np_, s, e):
    return Region("hbm", 7, "out", p, np_, s, e, 1, "float32", e - s)


def _brute(sides):
    """Every pair of accesses of different sides that overlap with a write: the O(n^2) reference."""
    acc = [(side, r, w) for side, ins_list in sides for ins in ins_list
           for w, regs in ((False, ins.reads), (True, ins.writes)) for r in regs]
    return any(a[0] != b[0] and (a[2] or b[2]) and a[1].overlaps(b[1])
               for a, b in itertools.combinations(acc, 2))


@pytest.mark.parametrize("seed", range(40))
def test_sweep_agrees_with_brute_force_pairs(seed):
    rng = np.random.default_rng(seed)
    sides = []
    idx = 0
    for side in range(int(rng.integers(2, 6))):
        lst = []
        for _ in range(int(rng.integers(1, 6))):
            p, s = int(rng.integers(0, 64)), int(rng.integers(0, 64)) * 4
            r = _reg(p, int(rng.integers(1, 8)), s, s + 4 * int(rng.integers(1, 8)))
            lst.append(_ins(idx, writes=[r]) if rng.random() < 0.3 else _ins(idx, reads=[r]))
            idx += 1
        sides.append((side, lst))
    found = races.detect(sides, 10 ** 6, frozenset(), "race-test", "sides", str)
    assert bool(found) == _brute(sides)


def test_many_disjoint_tiles_and_one_overlap():
    # 64 x 64 tiles of an HBM tensor, one per side: disjoint, then one tile shifted by a column
    sides = [(k, [_ins(k, writes=[_reg(128 * (k // 64), 128, 256 * (k % 64), 256 * (k % 64 + 1))])])
             for k in range(4096)]
    assert races.detect(sides, 10 ** 6, frozenset(), "race-test", "sides", str) == []
    sides.append((4096, [_ins(4096, writes=[_reg(0, 1, 252, 256)])]))
    got = races.detect(sides, 10 ** 6, frozenset(), "race-test", "sides", str)
    assert len(got) == 1 and got[0].overlap == "rows [0, 1) bytes [252, 256)"


# -- fast-forwarded loops: every pair of iterations, from the block's steps ------------------------

@nki.jit
def reads_four_ahead(x):
    """Iteration i writes column block i and reads block i + 4: only distance-4 pairs overlap."""
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    buf[...] = nl.load(x)
    for i in nl.affine_range(12):
        t = nl.add(buf[:, (i + 4) * 64:(i + 5) * 64], 1.0)
        buf[:, i * 64:(i + 1) * 64] = nl.copy(t)
    nl.store(out, value=buf)
    return out


@pytest.mark.parametrize("timing_only", [False, True])
def test_distance_four_dependency_found_with_and_without_fast_forward(timing_only):
    x = rnd(128, 1024)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        run = as_kernel(reads_four_ahead).run(x, options=Options(timing_only=timing_only))
    assert bool(run.traces[0].instructions.blocks) == timing_only
    got = [w.message for w in rec if issubclass(w.category, RaceWarning)]
    assert len(got) == 1
    # block 4 (bytes 1024..1280): written by iteration 4, read by iteration 0
    assert got[0].region == "partitions [0, 128) bytes [1024, 1280)"
    assert (got[0].first[:2], got[0].second[:2]) == (("iteration 4", "writes"),
                                                     ("iteration 0", "reads"))


@pytest.mark.parametrize("seed", range(30))
def test_distance_intervals_against_brute_force(seed):
    from trnsim.nki.core.races_ff import _distances, _nearest
    rng = np.random.default_rng(seed)
    lo, hi = sorted(int(v) for v in rng.integers(-300, 300, 2))
    step, n = int(rng.integers(-40, 41)), int(rng.integers(2, 30))
    want = [d for d in range(-(n - 1), n) if d and lo < d * step < hi]
    a, b = _distances(lo, hi, step)
    assert [d for d in range(-(n - 1), n) if d and a <= d <= b] == want
    best = min(want, key=lambda d: (abs(d), -d)) if want else None
    assert _nearest(a, b, n) == best


# -- replicas: programs that never read program_id -------------------------------------------------

@nki.jit
def replicated_copy(x):
    """No program_id: every program of the grid computes and stores the same whole output (as
    the nki-samples resize_nearest kernel launched with a grid does)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out


@nki.jit
def replicated_increment(x):
    """No program_id, but a read-modify-write of the output: each program adds 1 to what the
    others may or may not have written yet."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    nl.store(out, value=nl.add(nl.load(out), 1.0))
    return out


def test_identical_programs_writing_identical_values_are_not_races():
    x = rnd(128, 64)
    np.testing.assert_array_equal(strict_run(replicated_copy[4], x).outputs, 2 * x)


def test_identical_programs_still_race_on_a_read_modify_write():
    got = race_warnings(replicated_increment[2], rnd(128, 64))
    assert len(got) == 1 and got[0].rule == "race-spmd"
    assert {got[0].first[1], got[0].second[1]} == {"writes", "reads"}
