"""The fused block update ``x[...] = nl.add(x[...], y, dtype=bf16)`` (ops/hot_update.py): the
result computed straight into ``x`` by one C loop gives the reference path's bits (TRNSIM_FASTPATH
off: fp32 op into a fresh tile, rounded with ml_dtypes, copied into ``x``) and the same trace, for
NaN, inf, subnormal and signed-zero values, every op it takes, in-place and other destinations;
the statements it declines stay on the general path; results also match numpy computed here."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.nki.ops import hot_update  # noqa: E402
from trnsim.options import Options  # noqa: E402
from trace_compare import assert_identical as _assert_identical  # noqa: E402
from trace_compare import bits as _bits  # noqa: E402
from trace_compare import fast_and_reference as _both  # noqa: E402
from trace_compare import normalized  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}


class _Taken:
    """Counts the block updates written straight into their destination."""

    def __init__(self, monkeypatch):
        self.n = 0
        real = hot_update.assign_into

        def spy(*a):
            done = real(*a)
            self.n += bool(done)
            return done
        monkeypatch.setattr(hot_update, "assign_into", spy)


def _special(rng, shape, dtype):
    """Random values with NaN (both signs), inf, subnormals and signed zeros mixed in."""
    v = rng.standard_normal(shape, dtype=np.float32)
    flat = v.reshape(-1)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-39, -1e-39,
                         3.4e38, -3.4e38, 9.2e-41], np.float32)
    pick = rng.choice(flat.size, size=flat.size // 8, replace=False)
    flat[pick] = rng.choice(specials, size=pick.size)
    return v.astype(dtype)


def _update_kernel(op, P, N, dst_block):
    """res[dst] = nl.<op>(res[0], y, dtype=bf16) for a bf16 SBUF block and an fp32 SBUF tile,
    then res[1] = nl.<op>(res[1], res[1]) (the destination is both operands)."""
    @nki.jit
    def k(x, y):
        out = nl.ndarray((2, P, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        res = nl.ndarray((2, nl.par_dim(P), N), dtype=nl.bfloat16, buffer=nl.sbuf)
        for r in nl.affine_range(2):
            res[r] = nl.load(x[r])
        ty = nl.load(y)
        res[dst_block] = getattr(nl, op)(res[0], ty, dtype=nl.bfloat16)
        res[1] = getattr(nl, op)(res[1], res[1], dtype=nl.bfloat16)
        for r in nl.affine_range(2):
            nl.store(out[r], value=res[r])
        return out
    return k


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dst_block", [0, 1])
def test_special_values_give_the_reference_bits_in_place_and_elsewhere(op, dst_block,
                                                                        monkeypatch):
    P, N = 128, 4500  # rows longer than the C loop's chunk, so a NaN chunk is redone mid-row
    rng = np.random.default_rng(7 + dst_block)
    x = _special(rng, (2, P, N), BF16)
    y = _special(rng, (P, N), np.float32)
    taken = _Taken(monkeypatch)
    fast, ref = _both(_update_kernel(op, P, N, dst_block), x, y)
    assert taken.n == 2  # both statements written straight into res
    _assert_identical(fast, ref)
    # independent reference: fp32 op, then ml_dtypes' round to nearest even
    f = OPS[op]
    with np.errstate(all="ignore"):
        first = f(x[0].astype(np.float32), y).astype(BF16)
        second_in = first if dst_block == 1 else x[1]
        second = f(second_in.astype(np.float32), second_in.astype(np.float32)).astype(BF16)
    want = np.stack([first if dst_block == 0 else x[0], second])
    got = np.asarray(fast.outputs)
    same = (_bits(got) == _bits(want)) | (np.isnan(got.astype(np.float32)) &
                                          np.isnan(want.astype(np.float32)))
    assert same.all()


def test_the_bench_statement_with_a_psum_accumulator_is_fused(monkeypatch):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        sa = nl.load(a)
        sb = nl.load(b)
        res = nl.zeros((2, nl.par_dim(128), 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        for m in nl.affine_range(2):
            for r in nl.sequential_range(3):
                acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                acc += nisa.nc_matmul(sa, sb)
                res[m] = nl.add(res[m], acc, dtype=res.dtype)
            nl.store(out[m], value=res[m])
        return out

    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 128), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((128, 512), dtype=np.float32).astype(BF16)
    taken = _Taken(monkeypatch)
    fast, ref = _both(k, a, b)
    assert taken.n == 6
    _assert_identical(fast, ref)
    prod = a.astype(np.float64).T @ b.astype(np.float64)
    want = np.zeros_like(prod)
    for _ in range(3):
        want = (want + prod).astype(BF16).astype(np.float64)
    got = np.asarray(fast.outputs).astype(np.float64)
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()


def _declined_kernel(case):
    @nki.jit
    def k(x, y):
        out = nl.ndarray((2, 64, 96), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        out32 = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((2, nl.par_dim(64), 96), dtype=nl.bfloat16, buffer=nl.sbuf)
        r32 = nl.ndarray((nl.par_dim(64), 96), dtype=nl.float32, buffer=nl.sbuf)
        for r in nl.affine_range(2):
            res[r] = nl.load(x[r])
        ty = nl.load(y)
        r32[...] = nl.load(y)
        if case == "named":  # the result kept by name, then assigned: a copy, not fused
            t = nl.add(res[0], ty, dtype=nl.bfloat16)
            res[1] = t
        elif case == "call_in_key":  # a call between the op and the store: not fused
            res[int(1)] = nl.add(res[0], ty, dtype=nl.bfloat16)
        elif case == "fp32_destination":  # pending, then computed by the general retarget
            r32[...] = nl.add(res[0], ty, dtype=nl.bfloat16)
        elif case == "masked":
            i_p, i_f = nl.mgrid[0:64, 0:96]
            res[1, i_p, i_f] = nl.add(res[0, i_p, i_f], ty[i_p, i_f], dtype=nl.bfloat16,
                                      mask=(i_f < 50))
        elif case == "list_container":  # kept in a list past a write of its operand
            lst = [None]
            lst[0] = nl.add(res[0], ty, dtype=nl.bfloat16)
            res[0] = nl.load(x[1])
            res[1] = lst[0]
        elif case == "operand_of_another_op":  # pending, computed when read as an operand
            res[1] = nl.multiply(nl.add(res[0], ty, dtype=nl.bfloat16), 2.0,
                                 dtype=nl.bfloat16)
        for r in nl.affine_range(2):
            nl.store(out[r], value=res[r])
        nl.store(out32, value=r32)
        return out, out32
    return k


@pytest.mark.parametrize("case", ["named", "call_in_key", "fp32_destination", "masked",
                                  "list_container", "operand_of_another_op"])
def test_declined_statements_match_the_reference(case, monkeypatch):
    rng = np.random.default_rng(11)
    x = _special(rng, (2, 64, 96), BF16)
    y = _special(rng, (64, 96), np.float32)
    taken = _Taken(monkeypatch)
    fast, ref = _both(_declined_kernel(case), x, y)
    assert taken.n == 0
    for f, r in zip(fast.outputs, ref.outputs):
        np.testing.assert_array_equal(_bits(f), _bits(r))
    assert [normalized(t) for t in fast.traces] == [normalized(t) for t in ref.traces]


def test_stochastic_rounding_is_never_fused(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 32, 64), dtype=np.float32).astype(BF16)
    y = rng.standard_normal((32, 64), dtype=np.float32)
    taken = _Taken(monkeypatch)
    _update_kernel("add", 32, 64, 0).run(x, y, options=Options(target="trn1",
                                                               stochastic_rounding=True))
    assert taken.n == 0


def test_store_sites_are_read_from_the_bytecode():
    def f(res, nl, acc, m, g):
        res[m, 2 * m + 1] = nl.add(res[m], acc)  # loads and index arithmetic: a store site
        t = nl.add(res[m], acc)                  # kept by name
        res[g(m)] = nl.add(res[m], acc)          # a call in the key
        return t

    sites = hot_update._store_sites(f.__code__)
    import dis
    calls = [i.offset for i in dis.get_instructions(f) if i.opname.startswith("CALL")]
    stored = [c for c in calls if c in sites]
    assert len(stored) == 1 and stored[0] == calls[0]
