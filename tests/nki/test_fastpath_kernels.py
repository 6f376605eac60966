"""Whole kernels give the same bits and the same trace with the functional core's fast paths on
(C bf16 rounding, reused matmul product buffers, the inlined fp32 product emit) and off (the
reference: numpy expressions, fresh arrays, the general emit), over bf16, fp8 and fp32 operands,
strided operand views, masks, partial tiles, named (non-temporary) products, and NaN/inf values;
and the results agree with a float64 numpy reference computed here."""
import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trace_compare import assert_identical as _assert_identical  # noqa: E402
from trace_compare import fast_and_reference as _both  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3)
F32 = np.dtype(np.float32)


def _tiled(dt_in, M, K, N, KT, masked):
    """A blocked kernel: PSUM accumulation over KT K-tiles of strided operand views, then a bf16
    SBUF block update ``res = res + acc`` (masked or not) and a second product kept by name."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        sa = nl.ndarray((KT, nl.par_dim(K), 2 * M), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((KT, nl.par_dim(K), 2 * N), dtype=b.dtype, buffer=nl.sbuf)
        for t in nl.affine_range(KT):
            sa[t] = nl.load(a[t])
            sb[t] = nl.load(b[t])
        res = nl.zeros((2, nl.par_dim(M), N), dtype=nl.bfloat16, buffer=nl.sbuf)
        for r in nl.sequential_range(2):
            acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
            for t in nl.affine_range(KT):
                # the second half of each operand row: views at an offset, not whole tiles
                acc += nisa.nc_matmul(sa[t, :, M:2 * M], sb[t, :, N:2 * N])
            named = nisa.nc_matmul(sa[0, :, 0:M], sb[0, :, 0:N])  # kept by name: not recycled
            acc += named
            if masked:
                i_p, i_f = nl.mgrid[0:M, 0:N]
                res[r, i_p, i_f] = nl.add(res[r, i_p, i_f], acc[i_p, i_f], dtype=nl.bfloat16,
                                          mask=(i_p < M - 3) & (i_f >= 2))
            else:
                res[r] = nl.add(res[r], acc, dtype=nl.bfloat16)
            res[r] = nl.subtract(res[r], named, dtype=nl.bfloat16)
            res[r] = nl.multiply(res[r], res[r], dtype=nl.bfloat16)
            nl.store(out[r], value=res[r])
        return out
    return k


def _reference(a, b, M, N, masked):
    """float64 numpy for the kernel above (bf16 rounding of the three updates modelled with
    ml_dtypes; the product sums themselves in float64)."""
    f = np.float64
    acc = sum(a[t][:, M:].astype(f).T @ b[t][:, N:].astype(f) for t in range(a.shape[0]))
    named = a[0][:, :M].astype(f).T @ b[0][:, :N].astype(f)
    acc = acc + named
    m = np.ones((M, N), bool)
    if masked:
        ip, jf = np.mgrid[0:M, 0:N]
        m = (ip < M - 3) & (jf >= 2)
    outs = []
    for _ in range(2):  # each round updates its own block of res, zero at the start
        res = np.zeros((M, N), f)
        res = np.where(m, (res + acc).astype(BF16).astype(f), res)
        res = (res - named).astype(BF16).astype(f)
        res = (res * res).astype(BF16).astype(f)
        outs.append(res)
    return np.stack(outs)


@pytest.mark.parametrize("dt_in,M,K,N,KT,masked", [
    (BF16, 128, 128, 512, 3, False),   # the bench's tile shape (products recycled)
    (BF16, 96, 100, 300, 2, True),     # partial tiles, a mask
    (E4M3, 64, 128, 256, 2, False),    # fp8 operands
    (F32, 128, 64, 512, 2, True),      # fp32 operands
    (BF16, 1, 7, 5, 1, False),         # one row
])
def test_fast_and_reference_paths_agree_bit_for_bit(dt_in, M, K, N, KT, masked):
    rng = np.random.default_rng(M * 7 + K + N)
    a = (rng.standard_normal((KT, K, 2 * M), dtype=np.float32) / 4).astype(dt_in)
    b = (rng.standard_normal((KT, K, 2 * N), dtype=np.float32) / 4).astype(dt_in)
    fast, ref = _both(_tiled(dt_in, M, K, N, KT, masked), a, b)
    _assert_identical(fast, ref)
    want = _reference(a, b, M, N, masked)
    got = np.asarray(fast.outputs).astype(np.float64)
    # the kernel sums products in fp32 and rounds partial results to bf16 where the reference
    # rounds its float64 sums: agreement within a few bf16 ulps of the result's scale
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 0.05 * scale


def test_nan_and_inf_survive_the_fast_block_update_like_the_reference():
    @nki.jit
    def k(x, y):
        out = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        tx = nl.load(x)
        ty = nl.load(y)
        nl.store(out, value=nl.add(tx, ty, dtype=nl.bfloat16))
        return out

    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 64), dtype=np.float32)
    y = rng.standard_normal((128, 64), dtype=np.float32).astype(BF16)
    x[0, :4] = [np.nan, -np.nan, np.inf, -np.inf]
    y[0, :4] = [1, np.inf, -np.inf, -np.inf]
    # halfway between bf16's largest finite value and the next binade: ties to even, i.e. inf
    x[1, 0] = np.array([0x7f7f8000], np.uint32).view(np.float32)[0]
    y[1, 0] = 0
    fast, ref = _both(k, x, y)
    _assert_identical(fast, ref)
    got = np.asarray(fast.outputs)
    assert np.isnan(got[0, 0].astype(F32)) and np.isnan(got[0, 1].astype(F32))
    assert np.isnan(got[0, 2].astype(F32)) and got[0, 3].astype(F32) == -np.inf
    assert np.isposinf(got[1, 0].astype(F32))
