"""``psum += nc_matmul(...)`` as one BLAS call (fastpath.gemm_acc, hot_matmul.PendingStorage):
``c += a.T @ b`` through numpy's own sgemm with beta = 1 gives the bits of numpy's product
(``np.matmul``) added with ``np.add``, on random and special values; the arrays it cannot take are
declined untouched; and a deferred product that meets anything but a PSUM accumulation is computed
as the eager path computes it."""
import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.nki.core import fastpath  # noqa: E402
from trnsim.nki.ops import hot_matmul  # noqa: E402
from trnsim.options import Options  # noqa: E402
from trace_compare import normalized as _normalized  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)

needs_gemm = pytest.mark.skipif(not fastpath.gemm_ready(),
                                reason="C fast path not built or numpy's sgemm not found")


def _u32(x):
    return np.ascontiguousarray(x).view(np.uint32)


def _reference(c, a, b):
    """numpy: the product (np.matmul, as the eager path computes it), then the PSUM add."""
    return np.add(c, np.matmul(a.T, b))


def _specials(rng, shape, one_in=40):
    """fp32 values with signed zeros, infinities, NaNs and subnormals sprinkled in (each kind
    at about one element in ``one_in``)."""
    x = rng.standard_normal(shape, dtype=np.float32)
    pick = rng.integers(0, one_in, size=shape)
    x[pick == 0] = 0.0
    x[pick == 1] = -0.0
    x[pick == 2] = np.inf
    x[pick == 3] = -np.inf
    x[pick == 4] = np.nan
    x[pick == 5] = np.float32(1e-40)  # subnormal
    x[pick == 6] = np.float32(3e38)   # overflows when summed
    return x


@needs_gemm
@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (128, 128, 128), (64, 96, 200), (1, 2, 2),
                                   (2, 3, 5), (128, 2, 512), (127, 129, 33), (128, 64, 1024)])
@pytest.mark.parametrize("pad", [0, 7])
def test_gemm_acc_equals_matmul_then_add_bit_for_bit(K, M, N, pad):
    rng = np.random.default_rng(K * 1000 + M * 10 + N + pad)
    # operands as views into wider tiles (the kernels' column slices), accumulator contiguous
    a = rng.standard_normal((K, M + 2 * pad), dtype=np.float32)[:, pad:pad + M]
    b = rng.standard_normal((K, N + pad), dtype=np.float32)[:, :N]
    c = rng.standard_normal((M, N), dtype=np.float32) * 8
    want = _reference(c, a, b)
    assert fastpath.gemm_acc(c, a, b)
    np.testing.assert_array_equal(_u32(c), _u32(want))


@needs_gemm
@pytest.mark.parametrize("seed", range(4))
def test_gemm_acc_on_special_values_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    K, M, N = 128, 128, 512
    # sparse in the operands: most products stay finite, some are inf or NaN
    a, b = _specials(rng, (K, M), 20000), _specials(rng, (K, N), 20000)
    c = _specials(rng, (M, N))
    a[:, :4] = -0.0  # columns of -0 products meet -0 in the accumulator
    b[:, :8] = np.abs(b[:, :8])
    c[:4, :] = -0.0
    # a NaN in the accumulator: declined untouched (NaN + NaN keeps the first operand's bits,
    # and the BLAS kernel adds in the other order), the numpy path runs instead
    before = c.copy()
    assert fastpath.gemm_acc(c, a, b) is False
    np.testing.assert_array_equal(_u32(c), _u32(before))
    # without one, every value (inf, -inf, NaN products, subnormals, overflow) adds alike
    c[np.isnan(c)] = np.float32(-5.0)
    with np.errstate(all="ignore"):
        want = _reference(c, a, b)
    assert fastpath.gemm_acc(c, a, b)
    np.testing.assert_array_equal(_u32(c), _u32(want))
    assert np.isnan(want).any() and np.isinf(want).any()  # the cases were exercised


@needs_gemm
def test_gemm_acc_declines_what_numpy_would_not_send_to_gemm():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 32), dtype=np.float32)
    b = rng.standard_normal((64, 16), dtype=np.float32)
    c = np.zeros((32, 16), np.float32)
    declined = [
        (c[:1], a[:, :1], b),                         # M = 1: numpy uses gemv
        (c[:, :1], a, b[:, :1]),                      # N = 1: gemv
        (np.zeros((32, 32), np.float32), a, a),       # an operand times itself: numpy's syrk
        (c, a[:, ::-1], b),                           # negative column stride
        (c, a.astype(np.float64), b),                 # not fp32
        (c.T.copy().T, a, b),                         # column-major accumulator
        (np.zeros((31, 16), np.float32), a, b),       # shapes disagree
    ]
    for cc, aa, bb in declined:
        before = cc.copy()
        assert fastpath.gemm_acc(cc, aa, bb) is False
        np.testing.assert_array_equal(cc, before)
    # the accumulator overlapping an operand
    buf = rng.standard_normal((64, 64), dtype=np.float32)
    before = buf.copy()
    assert fastpath.gemm_acc(buf[:32, :16], buf[:, 32:], buf[:, 48:]) is False
    np.testing.assert_array_equal(buf, before)


def test_without_the_c_path_nothing_is_deferred():
    was = fastpath.set_enabled(False)
    try:
        assert fastpath.gemm_ready() is False
        c = np.zeros((4, 4), np.float32)
        assert fastpath.gemm_acc(c, np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)) \
            is False
        assert not c.any()
    finally:
        fastpath.set_enabled(was)


class _Gemms:
    """Counts fused accumulations: fastpath.gemm_submit (queued) or gemm_acc (synchronous)
    calls that returned True (replaced in hot_matmul's namespace)."""

    _NAMES = ("gemm_acc", "gemm_submit")

    def __init__(self):
        self.n = 0

    def __enter__(self):
        self._orig = {n: getattr(hot_matmul, n) for n in self._NAMES}

        def counting(fn):
            def counted(c, a, b):
                ok = fn(c, a, b)
                self.n += ok
                return ok
            return counted
        for n, fn in self._orig.items():
            setattr(hot_matmul, n, counting(fn))
        return self

    def __exit__(self, *exc):
        for n, fn in self._orig.items():
            setattr(hot_matmul, n, fn)
        return False


def _run_both(kernel, *args):
    was = fastpath.set_enabled(True)
    try:
        with _Gemms() as g:
            fast = kernel.run(*args, options=Options(target="trn1"))
        fastpath.set_enabled(False)
        ref = kernel.run(*args, options=Options(target="trn1"))
    finally:
        fastpath.set_enabled(was)
    return fast, ref, g.n




@needs_gemm
def test_deferred_products_are_fused_into_psum_or_computed_on_other_use():
    """PSUM accumulations take one BLAS call each; a product added into an SBUF tile or into a
    plain Python number is computed when read; all with the reference path's bits and trace."""
    KT = 3

    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        out3 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((KT, nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((KT, nl.par_dim(128), 128), dtype=b.dtype, buffer=nl.sbuf)
        for t in nl.affine_range(KT):
            sa[t] = nl.load(a[t])
            sb[t] = nl.load(b[t])
        acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(KT):
            acc += nisa.nc_matmul(sa[t], sb[t])
        nl.store(out, value=nl.copy(acc))
        sacc = nl.zeros((64, 128), nl.float32, buffer=nl.sbuf)
        sacc += nisa.nc_matmul(sa[0], sb[1])   # an SBUF accumulator: an elementwise add
        nl.store(out2, value=sacc)
        x = 0.0
        x += nisa.nc_matmul(sa[1], sb[0])     # 0.0 + product through __radd__
        nl.store(out3, value=nl.copy(x))
        return out, out2, out3

    rng = np.random.default_rng(3)
    a = (rng.standard_normal((KT, 128, 64), dtype=np.float32) / 4).astype(BF16)
    b = (rng.standard_normal((KT, 128, 128), dtype=np.float32) / 4).astype(BF16)
    fast, ref, fused = _run_both(k, a, b)
    assert fused == KT - 1  # the first product's shape is checked by the general path
    for got, r in zip(fast.outputs, ref.outputs):
        np.testing.assert_array_equal(_u32(got), _u32(r))
    assert _normalized(fast.traces[0]) == _normalized(ref.traces[0])
    f = np.float32
    p = [a[i].astype(f).T @ b[j].astype(f) for i, j in ((0, 0), (1, 1), (2, 2), (0, 1), (1, 0))]
    want = np.zeros((64, 128), f)
    for x in p[:3]:
        want = want + x
    out, out2, out3 = fast.outputs
    np.testing.assert_array_equal(_u32(out), _u32(want))
    np.testing.assert_array_equal(_u32(out2), _u32(np.zeros((64, 128), f) + p[3]))
    np.testing.assert_array_equal(_u32(out3), _u32(np.float32(0.0) + p[4]))


@needs_gemm
def test_a_product_stored_by_name_is_computed_at_once():
    """``p = nc_matmul(...)`` is not followed by ``+=``: no pending storage."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.load(a)
        sb = nl.load(b)
        acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(sa, sb)  # checks the shape once (general path)
        p = nisa.nc_matmul(sa, sb)
        kinds.append(type(p._st))
        acc += p
        nl.store(out, value=nl.copy(acc))
        return out

    kinds = []
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((128, 64), dtype=np.float32) / 4).astype(BF16)
    b = (rng.standard_normal((128, 128), dtype=np.float32) / 4).astype(BF16)
    fast, ref, fused = _run_both(k, a, b)
    assert kinds[0] is not hot_matmul.PendingStorage and fused == 0
    np.testing.assert_array_equal(_u32(fast.outputs), _u32(ref.outputs))
    p = a.astype(F32).T @ b.astype(F32)
    np.testing.assert_array_equal(_u32(fast.outputs), _u32(p + p))


def test_iadd_sites_are_found_in_the_bytecode():
    def f(acc, g, t):
        acc += g(t)
        y = g(t)
        acc[0] += g(t, k=1)
        return acc, y

    sites = hot_matmul._iadd_sites(f.__code__)
    import dis
    calls = [i for i in dis.get_instructions(f) if i.opname.startswith("CALL")]
    hit = [c.offset in sites for c in calls]
    assert hit == [True, False, True], (hit, sys.version)
