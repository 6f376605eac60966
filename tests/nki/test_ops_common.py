"""Shared pieces of the per-instruction suite (``test_ops_*.py``, ``test_rounding.py``).

Everything here is an *independent* reference: inputs are generated on the host, rounded to the
input dtype with ml_dtypes, the expected result is computed in float64 with numpy and then rounded
the way the hardware writes (float32 first, because the engines compute in fp32 [ARCH2], then to
the output dtype with round-to-nearest-even).  Nothing is compared with trnsim's own earlier output.

The module also holds a few tests of these helpers themselves (bottom of the file).
"""
from __future__ import annotations

import os
from typing import Callable

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# --------------------------------------------------------------------------------------------
# hypothesis profile: small and deterministic (the same examples every run, no example database on
# disk).  TRNSIM_OPS_EXAMPLES=N switches to N random examples per test for a deeper bug hunt.
_HUNT = int(os.environ.get("TRNSIM_OPS_EXAMPLES", "0"))
SETTINGS = settings(max_examples=_HUNT or 40, deadline=None, derandomize=not _HUNT, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])
FEW = settings(SETTINGS, max_examples=max(_HUNT // 2, 20))

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3)      # NKI float8_e4m3: +-240, has inf
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)  # OCP, +-448, no inf
FLOATS = (F32, BF16, F16, E4M3, E5M2)
LOW = (BF16, F16, E4M3, E5M2)
INTS = (np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.int16),
        np.dtype(np.uint16), np.dtype(np.uint32))


def legacy():
    """The legacy front end, imported the way public kernels import it."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    return nki, nl, nisa


def options(target: str = "trn2", **kw):
    from trnsim.options import Options
    kw.setdefault("strict", True)  # a never-written value reaching an output is an error
    return Options(target=target, **kw)


def run(kernel, *args, target: str = "trn2", **kw):
    """Run a kernel under explicit options (not the environment) and return its outputs."""
    return kernel.run(*args, options=options(target, **kw)).outputs


def apply(body: Callable, *inputs: np.ndarray, target: str = "trn2", **kw):
    """Load every input into SBUF, call ``body(*tiles)`` and store its result tile to HBM in the
    result's own dtype (so the store does not round).  Returns the numpy result."""
    nki, nl, nisa = legacy()

    @nki.jit
    def kernel(*xs):
        tiles = [nl.load(x) for x in xs]
        r = body(*tiles)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return run(kernel, *inputs, target=target, **kw)


_I32, _U8, _I8, _I16, _U16, _U32 = (np.dtype(t) for t in (np.int32, np.uint8, np.int8, np.int16,
                                                          np.uint16, np.uint32))


def _fl(d):
    return d.kind == "f" or d in LOW


def ref_promote(a, b):
    """NKI type promotion as the legacy docs spell it out (nki.api.shared.rst 'NKI Type
    Promotion'), written as an explicit table rather than an algorithm."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if _fl(a) != _fl(b):
        return a if _fl(a) else b
    pair = frozenset([a, b])
    table = {
        frozenset([F32, BF16]): F32, frozenset([F32, F16]): F32, frozenset([F16, BF16]): F32,
        frozenset([E4M3, F16]): F16, frozenset([E5M2, F16]): F16,
        frozenset([E4M3, BF16]): BF16, frozenset([E5M2, BF16]): BF16,
        frozenset([E4M3, E5M2]): BF16, frozenset([E4M3, F32]): F32, frozenset([E5M2, F32]): F32,
        frozenset([_I16, _I32]): _I32, frozenset([_U8, _U16]): _U16, frozenset([_U16, _I32]): _I32,
        frozenset([_I8, _U8]): _I16, frozenset([_I8, _U16]): _I32, frozenset([_I32, _U32]): F32,
        frozenset([_I8, _I16]): _I16, frozenset([_I8, _I32]): _I32, frozenset([_U8, _I32]): _I32,
        frozenset([_U8, _I16]): _I16, frozenset([_U8, _U32]): _U32, frozenset([_U16, _U32]): _U32,
        frozenset([_I16, _U16]): _I32, frozenset([_I16, _U32]): F32, frozenset([_I8, _U32]): F32,
    }
    return table[pair]


# --------------------------------------------------------------------------------------------
# strategies

@st.composite
def tile_shapes(draw, max_free: int = 512, max_dims: int = 3, pmin: int = 1, pmax: int = 128):
    """(P, f1[, f2[, f3]]): partitions 1..128 and 1..3 free dims with a bounded free size."""
    p = draw(st.integers(pmin, pmax))
    nd = draw(st.integers(1, max_dims))
    free = []
    budget = max_free
    for _ in range(nd):
        f = draw(st.integers(1, max(1, min(budget, 64 if nd > 1 else max_free))))
        free.append(f)
        budget = max(1, budget // f)
    return (p,) + tuple(free)


seeds = st.integers(0, 2 ** 32 - 1)


# --------------------------------------------------------------------------------------------
# inputs

def finfo(dt):
    return ml_dtypes.finfo(dt) if dt in LOW or dt == E4M3FN else np.finfo(dt)


def rand_float(rng, shape, dt, *, scale_exp=(-3, 4), special: float = 0.0, lo=None, hi=None,
               positive=False) -> np.ndarray:
    """Random values of dtype ``dt`` (already rounded to it): normal * 2^k with k spread over
    ``scale_exp`` so many binades are hit; optional share ``special`` of +-0 / +-inf / NaN."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(scale_exp[0], scale_exp[1] + 1, shape))
    if positive:
        x = np.abs(x) + 2.0 ** scale_exp[0]
    if lo is not None or hi is not None:
        x = np.clip(x, lo, hi)
    big = float(finfo(dt).max)
    x = np.clip(x, -big, big)
    if special:
        pick = rng.random(shape) < special
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
        x = np.where(pick, pool[rng.integers(0, len(pool), shape)], x)
    return x.astype(np.float32).astype(dt)


def rand_int(rng, shape, dt, lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(dt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dt)


def rand(rng, shape, dt, **kw) -> np.ndarray:
    dt = np.dtype(dt)
    if dt.kind in "iub":
        return rand_int(rng, shape, dt, kw.get("lo"), kw.get("hi"))
    return rand_float(rng, shape, dt, **kw)


def f64(x) -> np.ndarray:
    """Exact float64 image of an array of any NKI float dtype."""
    return np.asarray(x).astype(np.float64)


# --------------------------------------------------------------------------------------------
# reference rounding

def round_f2i(v, dt) -> np.ndarray:
    """Float -> integer as numerics.toml says: round half to even, saturate, NaN -> 0.
    Written with floor and an explicit tie rule, independent of np.rint."""
    v = np.asarray(v, np.float64)
    with np.errstate(invalid="ignore"):
        fl = np.floor(v)
        frac = v - fl
        odd = np.mod(fl, 2.0) != 0
    r = np.where(frac > 0.5, fl + 1, np.where(frac < 0.5, fl, np.where(odd, fl + 1, fl)))
    r = np.where(np.isnan(v), 0.0, r)
    info = np.iinfo(dt)
    r = np.clip(r, info.min, info.max)  # +-inf saturate too
    return r.astype(dt)


def write(v, dt) -> np.ndarray:
    """What an engine writes for exact value ``v`` (float64): round to fp32 (the ALU result),
    then to ``dt`` (RNE for floats; RNE + saturation for ints; bool = nonzero)."""
    dt = np.dtype(dt)
    v32 = np.asarray(v, np.float64).astype(np.float32)
    if dt == np.bool_:
        return v32 != 0
    if dt.kind in "iu":
        return round_f2i(v32, dt)
    return v32.astype(dt)


# --------------------------------------------------------------------------------------------
# comparisons

def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def is_nan(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return np.zeros(a.shape, bool)
    return np.isnan(a.astype(np.float64))


def assert_exact(got, ref, *, signed_zero: bool = True, what: str = ""):
    """Bit-exact equality (any NaN matches any NaN; +0 == -0 only if ``signed_zero`` is off)."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    gn, rn = is_nan(got), is_nan(ref)
    if ref.dtype.kind in "iub":
        bad = got != ref
    else:
        if signed_zero:
            bad = (_bits(got) != _bits(ref)) & ~(gn & rn)
        else:
            bad = ~((got.astype(np.float64) == ref.astype(np.float64)) | (gn & rn))
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ; first at "
                             f"{i}: got {got[i]!r} expected {ref[i]!r}")


def ulp(x, dt) -> np.ndarray:
    """Unit in the last place of dtype ``dt`` at magnitude |x| (subnormal spacing at the bottom)."""
    fi = finfo(dt)
    m = int(fi.nmant)
    tiny = float(fi.smallest_normal) if hasattr(fi, "smallest_normal") else float(fi.tiny)
    ax = np.maximum(np.abs(np.asarray(x, np.float64)), tiny)
    e = np.floor(np.log2(ax))
    return np.exp2(e - m)


def assert_close(got, ref, *, ulps: float = 1.0, dt=None, atol: float = 0.0, rtol: float = 0.0,
                 what: str = ""):
    """|got - ref| <= ulps * ulp_dt(ref) + atol + rtol*|ref|; NaN and inf must match exactly."""
    got = np.asarray(got).astype(np.float64)
    ref = np.asarray(ref).astype(np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    gn, rn = np.isnan(got), np.isnan(ref)
    if (gn != rn).any():
        i = tuple(np.argwhere(gn != rn)[0])
        raise AssertionError(f"{what}: NaN mismatch at {i}: got {got[i]} expected {ref[i]}")
    fin = np.isfinite(ref)
    inf_bad = ~fin & ~rn & (got != ref)
    if inf_bad.any():
        i = tuple(np.argwhere(inf_bad)[0])
        raise AssertionError(f"{what}: inf mismatch at {i}: got {got[i]} expected {ref[i]}")
    tol = atol + rtol * np.abs(ref)
    if dt is not None:
        tol = tol + ulps * ulp(ref, dt)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - ref)
    bad = fin & ~(err <= tol)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        worst = float(np.nanmax(np.where(fin, err - tol, -np.inf)))
        t = tol[i] if np.ndim(tol) else tol
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} beyond tolerance; worst "
                             f"{worst}; first at {i}: got {got[i]!r} expected {ref[i]!r} tol {t}")


def sum_bound(abs_terms_sum, n, extra: float = 0.0):
    """Error bound of an fp32 sum of ``n`` terms in any order: (n - 1) * 2^-24 * sum|terms| (each
    addition rounds once with relative error <= 2^-24; Higham, Accuracy and Stability, 4.2)."""
    return (max(n - 1, 0) + extra) * 2.0 ** -24 * np.asarray(abs_terms_sum, np.float64)


# --------------------------------------------------------------------------------------------
# tests of the helpers themselves

def test_round_f2i_ties_to_even_and_saturates():
    v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, np.nan, 1e10, -1e10, np.inf, -np.inf])
    assert round_f2i(v, np.int32).tolist() == [0, 2, 2, 0, -2, -2, 2, 0, 2 ** 31 - 1, -2 ** 31,
                                               2 ** 31 - 1, -2 ** 31]
    assert round_f2i(np.array([255.5, 256.0, -3.0]), np.uint8).tolist() == [255, 255, 0]


def test_ulp_matches_spacing():
    for dt in FLOATS:
        assert ulp(1.0, dt) == float(finfo(dt).eps)
        assert ulp(-3.0, dt) == 2 * float(finfo(dt).eps)


def test_assert_exact_distinguishes_signed_zero():
    a = np.array([0.0], np.float32)
    b = np.array([-0.0], np.float32)
    with pytest.raises(AssertionError):
        assert_exact(a, b)
    assert_exact(a, b, signed_zero=False)
    assert_exact(np.array([np.nan], np.float32), np.array([-np.nan], np.float32))
