"""Per-instruction checks of the Tensor engine (legacy API): nisa.nc_matmul with fp32 / bf16 /
fp16 / fp8 inputs (mixed where legal), multi-dim free axes, PSUM ``+=`` accumulation, double_row
(trn2), transpose mode, PE tiling; nisa.nc_transpose on the Tensor and Vector engines; nl.matmul
with and without transpose_x.

Tolerance of a matmul: the PE array multiplies exactly for bf16/fp16/fp8 inputs (the products fit
fp32) and accumulates in fp32 [ARCH2]; the order of the K additions is not documented, so the
result is compared with the float64 product under the n-term fp32 summation bound
(K - 1) * 2^-24 * sum_k |a_k b_k|.  fp32 inputs add one rounding per product (K + 1 terms).
Transposes are data movement and are checked bit-exactly (NaN/Inf included from trn2 on).
"""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from test_ops_common import (BF16, E4M3, E5M2, F16, F32, FEW, LOW, SETTINGS, apply,
                             assert_exact, f64, legacy, rand_float, run, seeds, sum_bound)


def _mm_check(got, a, b, extra=0.0, k=None):
    A = f64(a).reshape(a.shape[0], -1)
    B = f64(b).reshape(b.shape[0], -1)
    ref = A.T @ B
    bound = sum_bound(np.abs(A).T @ np.abs(B), A.shape[0] if k is None else k, extra=extra)
    got = np.asarray(got).astype(np.float64).reshape(ref.shape)
    err = np.abs(got - ref)
    assert np.all(err <= bound + 1e-300), f"max excess {np.max(err - bound)}"


@SETTINGS
@given(K=st.integers(1, 128), M=st.integers(1, 128), N=st.integers(1, 512),
       ds=st.sampled_from(LOW), dm=st.sampled_from(LOW), seed=seeds,
       target=st.sampled_from(["trn1", "trn2", "trn3"]))
def test_nc_matmul_low_precision_inputs(K, M, N, ds, dm, seed, target):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (K, M), ds, scale_exp=(-2, 2))
    b = rand_float(rng, (K, N), dm, scale_exp=(-2, 2))
    got = apply(lambda s, m: nisa.nc_matmul(s, m), a, b, target=target)
    assert got.dtype == F32 and got.shape == (M, N)
    _mm_check(got, a, b)


@SETTINGS
@given(K=st.integers(1, 128), M=st.integers(1, 128), N=st.integers(1, 512), seed=seeds,
       onezero=st.booleans())
def test_nc_matmul_fp32(K, M, N, seed, onezero):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (K, M), F32)
    b = rand_float(rng, (K, N), F32)
    got = apply(lambda s, m: nisa.nc_matmul(s, m, is_stationary_onezero=onezero,
                                            is_moving_onezero=onezero), a, b)
    _mm_check(got, a, b, extra=2)


@FEW
@given(K=st.integers(1, 128), shp=st.sampled_from([((2, 3), (4, 5)), ((8, 16), (16, 32)),
                                                   ((1, 128), (512, 1)), ((4, 4), (2, 2, 2))]),
       seed=seeds)
def test_nc_matmul_multi_dim_free_axes(K, shp, seed):
    """Free axes of both operands are flattened: stationary (K, a, b) gives M = a*b rows."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (K,) + shp[0], BF16)
    b = rand_float(rng, (K,) + shp[1], BF16)
    got = apply(lambda s, m: nisa.nc_matmul(s, m), a, b)
    M, N = int(np.prod(shp[0])), int(np.prod(shp[1]))
    assert got.shape == (M, N)
    _mm_check(got, a, b)


def test_nc_matmul_fp32_cannot_pair_with_narrow_types():
    from trnsim.errors import DtypeError
    nki, nl, nisa = legacy()
    with pytest.raises(DtypeError):
        apply(lambda s, m: nisa.nc_matmul(s, m), np.ones((4, 4), np.float32),
              np.ones((4, 4), np.float32).astype(BF16))


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_nc_matmul_limits(target):
    from trnsim.errors import ShapeError
    nki, nl, nisa = legacy()
    with pytest.raises(ShapeError):  # moving free > 512
        apply(lambda s, m: nisa.nc_matmul(s, m), np.ones((4, 4), BF16), np.ones((4, 513), BF16),
              target=target)
    with pytest.raises(ShapeError):  # stationary free > 128
        apply(lambda s, m: nisa.nc_matmul(s, m), np.ones((4, 129), BF16), np.ones((4, 4), BF16),
              target=target)


# --------------------------------------------------------------------------------------------
# PSUM accumulation

@SETTINGS
@given(KT=st.integers(1, 5), K=st.integers(1, 128), M=st.integers(1, 128), N=st.integers(1, 512),
       dt=st.sampled_from([BF16, F16, E4M3, F32]), seed=seeds,
       start=st.sampled_from(["zeros", "ndarray"]), via=st.sampled_from(["nisa", "nl"]))
def test_psum_plus_equals_accumulation(KT, K, M, N, dt, seed, start, via):
    """``psum[...] += nc_matmul(...)`` over KT K-tiles adds in fp32; on never-written PSUM
    (nl.ndarray) the first matmul starts the accumulation group."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (KT, K, M), dt, scale_exp=(-2, 2))
    b = rand_float(rng, (KT, K, N), dt, scale_exp=(-2, 2))

    @nki.jit
    def k(ain, bin_):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        if start == "zeros":
            acc = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
        else:
            acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        for kt in nl.affine_range(KT):
            s = nl.load(ain[kt])
            m = nl.load(bin_[kt])
            if via == "nisa":
                acc += nisa.nc_matmul(s, m)
            else:
                acc[...] += nl.matmul(s, m, transpose_x=True)
        nl.store(out, value=acc)
        return out

    got = run(k, a, b)
    A = np.concatenate([f64(a[i]) for i in range(KT)], axis=0)  # K-tiles stacked
    B = np.concatenate([f64(b[i]) for i in range(KT)], axis=0)
    _mm_check(got, A, B, extra=2 if dt == F32 else 0, k=KT * K)


def test_psum_accumulation_then_loop_reduce_to_sbuf():
    """contributed/matmul.py pattern: PSUM K-accumulation, then loop_reduce into an SBUF tile."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(11)
    a = rng.integers(-4, 5, (3, 2, 64, 32)).astype(np.float32).astype(BF16)
    b = rng.integers(-4, 5, (3, 2, 64, 48)).astype(np.float32).astype(BF16)

    @nki.jit
    def k(ain, bin_):
        out = nl.ndarray((32, 48), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((32, 48), dtype=nl.float32, buffer=nl.sbuf)
        for k2 in nl.affine_range(3):
            ps = nl.zeros((32, 48), dtype=nl.float32, buffer=nl.psum)
            for k1 in nl.affine_range(2):
                ps += nisa.nc_matmul(nl.load(ain[k2, k1]), nl.load(bin_[k2, k1]))
            acc[...] = nl.loop_reduce(ps, op=np.add, loop_indices=[k2], dtype=nl.float32)
        nl.store(out, value=acc)
        return out

    got = run(k, a, b)
    ref = sum(f64(a[i, j]).T @ f64(b[i, j]) for i in range(3) for j in range(2))
    assert_exact(got, ref.astype(np.float32))  # small integers: every sum is exact in fp32


# --------------------------------------------------------------------------------------------
# double_row (trn2+)

@SETTINGS
@given(K=st.integers(1, 128), M=st.integers(1, 128), N=st.integers(1, 512),
       ds=st.sampled_from([E4M3, E5M2]), dm=st.sampled_from([E4M3, E5M2]), seed=seeds,
       spelling=st.sampled_from(["double_row_gen3", "double_row"]))
def test_nc_matmul_double_row(K, M, N, ds, dm, seed, spelling):
    """fp8 [K, 2, F] operands: the contraction runs over the partition dim and the size-2 dim
    (K x 2 terms), fp32 accumulation."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (K, 2, M), ds, scale_exp=(-2, 2))
    b = rand_float(rng, (K, 2, N), dm, scale_exp=(-2, 2))
    got = apply(lambda s, m: nisa.nc_matmul(s, m, perf_mode=spelling), a, b, target="trn2")
    assert got.shape == (M, N) and got.dtype == F32
    A = f64(a).reshape(2 * K, M)
    B = f64(b).reshape(2 * K, N)
    _mm_check(got, A, B)


def test_double_row_rules():
    from trnsim.errors import DtypeError, KernelError, ShapeError, TrnsimError
    nki, nl, nisa = legacy()
    a = np.ones((8, 2, 4), E4M3)
    b = np.ones((8, 2, 4), E4M3)
    with pytest.raises(KernelError, match="double_row"):
        apply(lambda s, m: nisa.nc_matmul(s, m, perf_mode="double_row_gen3"), a, b,
              target="trn1")
    with pytest.raises(DtypeError):
        apply(lambda s, m: nisa.nc_matmul(s, m, perf_mode="double_row_gen3"), a.astype(BF16),
              b.astype(BF16))
    with pytest.raises(ShapeError):
        apply(lambda s, m: nisa.nc_matmul(s, m, perf_mode="double_row_gen3"),
              np.ones((8, 3, 4), E4M3), np.ones((8, 3, 4), E4M3))
    with pytest.raises(TrnsimError):
        apply(lambda s, m: nisa.nc_matmul(s, m, perf_mode="double_row_gen3", is_transpose=True),
              a, b)


# --------------------------------------------------------------------------------------------
# transposes

def _with_specials(rng, x):
    if x.dtype.kind != "f" and x.dtype not in LOW:
        return x
    v = f64(x).copy()
    pick = rng.random(v.shape) < 0.08
    pool = np.array([np.nan, np.inf, -np.inf, -0.0])
    v[pick] = pool[rng.integers(0, 4, v.shape)][pick]
    return v.astype(np.float32).astype(x.dtype)


@SETTINGS
@given(K=st.integers(1, 128), M=st.integers(1, 128), dt=st.sampled_from([F32, BF16, F16]),
       seed=seeds)
def test_nc_matmul_transpose_mode_is_bit_exact_on_trn2(K, M, dt, seed):
    """is_transpose=True with an identity moving tile: from NeuronCore-v3 a bit-accurate
    transpose even with NaN/Inf; 16-bit inputs give 16-bit PSUM output [ARCH3]."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = _with_specials(rng, rand_float(rng, (K, M), dt))
    ident = np.eye(K, dtype=np.float32).astype(dt)
    got = apply(lambda s, i: nisa.nc_matmul(s, i, is_transpose=True), x, ident)
    assert got.dtype == dt and got.shape == (M, K)
    assert_exact(got, x.T.copy())


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 128), dt=st.sampled_from([F32, BF16, F16, E4M3,
                                                                         E5M2]),
       seed=seeds, target=st.sampled_from(["trn1", "trn2"]))
def test_nc_transpose_tensor_engine(P, F, dt, seed, target):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), dt)
    if target == "trn2":
        x = _with_specials(rng, x)  # bit-accurate from NeuronCore-v3 on
    got = apply(lambda t: nisa.nc_transpose(t, engine=nisa.tensor_engine), x, target=target)
    assert got.shape == (F, P)
    if target == "trn2" and dt in (BF16, F16):
        assert got.dtype == dt
    elif target == "trn1":
        assert got.dtype == F32  # gen2: an identity matmul with fp32 PSUM output
    # values are the transposed input (exact: 1.0 * x, plus zeros)
    assert_exact(got.astype(np.float64), f64(x).T.copy(),
                 signed_zero=target != "trn1")


VEC_T = (F32, BF16, F16, E4M3, E5M2, np.dtype(np.int32), np.dtype(np.uint8))


@SETTINGS
@given(P=st.integers(1, 32), F=st.integers(1, 32), dt=st.sampled_from(VEC_T), seed=seeds,
       from_psum=st.booleans())
def test_nc_transpose_vector_engine(P, F, dt, seed, from_psum):
    """Vector-engine transpose (<= 32x32, SBUF or PSUM) keeps the dtype and every bit."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    if dt.kind in "iu":
        x = rng.integers(0, 100, (P, F)).astype(dt)
    else:
        x = _with_specials(rng, rand_float(rng, (P, F), dt))

    def body(t):
        if from_psum:
            p = nl.ndarray((P, F), dtype=dt, buffer=nl.psum)
            p[...] = nisa.tensor_copy(t)
            t = p
        return nisa.nc_transpose(t, engine=nisa.vector_engine)

    got = apply(body, x)
    assert_exact(got, x.T.copy())


def test_nc_transpose_vector_engine_limit():
    from trnsim.errors import ShapeError
    nki, nl, nisa = legacy()
    with pytest.raises(ShapeError):
        apply(lambda t: nisa.nc_transpose(t, engine=nisa.vector_engine),
              np.ones((33, 4), np.float32))


# --------------------------------------------------------------------------------------------
# PE tiling

@SETTINGS
@given(data=st.data(), target=st.sampled_from(["trn1", "trn2"]), seed=seeds,
       dt=st.sampled_from([BF16, F32]))
def test_nc_matmul_tile_position_and_size(data, target, seed, dt):
    """PE tiling changes where the matmul runs in the array, never its result."""
    nki, nl, nisa = legacy()
    g = 64 if target == "trn1" else 32
    rs = data.draw(st.sampled_from([s for s in (32, 64, 128) if s % g == 0]), label="rows")
    cs = data.draw(st.sampled_from([s for s in (32, 64, 128) if s % g == 0]), label="cols")
    if target == "trn1":
        assume(not (rs == 32 and cs == 32))
    rp = data.draw(st.sampled_from(list(range(0, 128 - rs + 1, rs))), label="row pos")
    cp = data.draw(st.sampled_from(list(range(0, 128 - cs + 1, cs))), label="col pos")
    K = data.draw(st.integers(1, rs), label="K")
    M = data.draw(st.integers(1, cs), label="M")
    N = data.draw(st.integers(1, 512), label="N")
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (K, M), dt)
    b = rand_float(rng, (K, N), dt)
    got = apply(lambda s, m: nisa.nc_matmul(s, m, tile_position=(rp, cp), tile_size=(rs, cs)),
                a, b, target=target)
    _mm_check(got, a, b, extra=2 if dt == F32 else 0)


def test_nc_matmul_tiling_rules():
    from trnsim.errors import KernelError, ShapeError
    nki, nl, nisa = legacy()
    a = np.ones((64, 32), BF16)
    b = np.ones((64, 16), BF16)
    with pytest.raises(ShapeError):  # 64 rows do not fit a 32-row tile
        apply(lambda s, m: nisa.nc_matmul(s, m, tile_position=(0, 0), tile_size=(32, 32)), a, b)
    with pytest.raises(KernelError):  # not a multiple of 32
        apply(lambda s, m: nisa.nc_matmul(s, m, tile_position=(0, 0), tile_size=(48, 64)), a, b)
    with pytest.raises(KernelError):  # 32-granularity is gen3+; gen2 tiles are 2 x 64
        apply(lambda s, m: nisa.nc_matmul(s, m, tile_position=(64, 0), tile_size=(64, 32)),
              a, b, target="trn1")
    with pytest.raises(KernelError):  # leaves the 128 x 128 array
        apply(lambda s, m: nisa.nc_matmul(s, m, tile_position=(96, 0), tile_size=(64, 64)), a, b)


# --------------------------------------------------------------------------------------------
# nl.matmul

@SETTINGS
@given(M=st.integers(1, 128), K=st.integers(1, 128), N=st.integers(1, 512),
       dt=st.sampled_from([F32, BF16, F16, E4M3]), transpose_x=st.booleans(), seed=seeds,
       target=st.sampled_from(["trn1", "trn2"]))
def test_nl_matmul(M, K, N, dt, transpose_x, seed, target):
    """nl.matmul(x, y) = x @ y (lowered to nc_matmul(transpose(x), y)); with transpose_x=True,
    x is given as (K, M) and the result is x.T @ y."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    xs = (K, M) if transpose_x else (M, K)
    x = rand_float(rng, xs, dt, scale_exp=(-2, 2))
    y = rand_float(rng, (K, N), dt, scale_exp=(-2, 2))
    got = apply(lambda a, b: nl.matmul(a, b, transpose_x=transpose_x), x, y, target=target)
    assert got.shape == (M, N)
    xt = x if transpose_x else x.T
    _mm_check(got, xt, y, extra=2 if dt == F32 else 0)


@FEW
@given(P=st.integers(1, 128), F=st.integers(1, 128), dt=st.sampled_from([F32, BF16, F16]),
       seed=seeds)
def test_nl_transpose(P, F, dt, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), dt)
    got = apply(lambda t: nl.transpose(t), x)
    assert got.shape == (F, P)
    assert_exact(got.astype(np.float64), f64(x).T.copy())
