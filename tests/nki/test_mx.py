"""MX (microscaling) on NeuronCore-v4: nc_matmul_mx / quantize_mx against references written here.

The references follow the public docs (nki/deep-dives/mxfp-matmul.rst and its CPU utilities,
nki.isa docstrings): x4 words hold 4 values, value j in byte / nibble j (little endian); one scale
per 8 partitions x 1 x4 column; scales of quadrant q in rows 32q..32q+3 of the scale tile;
contraction over partitions and the 4 packed values; QuantizeMX scale
2^(floor(log2 amax) - (Emax - 1)), zero block 2^-127.
"""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trnsim.errors import DtypeError, KernelError, MemoryAccessError, ShapeError
from trnsim.nki.core import alloc
from trnsim.nki.core.context import current
from trnsim.nki.core import dtypes as dt
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, elementwise, mx
from trnsim.options import Options
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

E4 = np.dtype(ml_dtypes.float8_e4m3fn)
E5 = np.dtype(ml_dtypes.float8_e5m2)
F4 = np.dtype(ml_dtypes.float4_e2m1fn)
X4 = {E4: dt.float8_e4m3fn_x4, E5: dt.float8_e5m2_x4, F4: dt.float4_e2m1fn_x4}
WORD = {E4: np.uint32, E5: np.uint32, F4: np.uint16}


def _run(fn, *args, target="trn3"):
    return Kernel(fn, api="new").run(*args, options=Options(target=target))


def _nd(shape, dtype, buf):
    return alloc.ndarray(tuple(shape), dtype, buf, conv=NEW)


# -- independent host reference -------------------------------------------------------------------

def ref_values(words, elem):
    """x4 words [P, F] -> float64 values [P, F, 4] (value j = byte / nibble j, LSB first)."""
    words = np.ascontiguousarray(words)
    if elem == F4:
        b = words.view(np.uint8).reshape(words.shape + (2,))          # little-endian bytes
        nib = np.stack([b[..., 0] & 0xF, b[..., 0] >> 4, b[..., 1] & 0xF, b[..., 1] >> 4], -1)
        return nib.astype(np.uint8).view(F4).astype(np.float64)
    return words.view(elem).astype(np.float64).reshape(words.shape + (4,))


def ref_dequant(words, elem, scales):
    """Contiguous scales [P // 8, F] (uint8) -> float64 [P, F, 4]."""
    f = 2.0 ** (scales.astype(np.float64) - 127)
    return ref_values(words, elem) * np.repeat(f, 8, axis=0)[:, :, None]


def ref_matmul(sw, s_elem, ss, mw, m_elem, ms):
    a = ref_dequant(sw, s_elem, ss)
    b = ref_dequant(mw, m_elem, ms)
    exact = np.einsum("kiq,kjq->ij", a, b)
    bound = np.einsum("kiq,kjq->ij", np.abs(a), np.abs(b))
    return exact, bound


def ref_scatter(scales, P):
    """Contiguous [P // 8, F] -> SBUF layout ([4, F] for P = 32, else [P, F])."""
    rows = 4 if P == 32 else P
    out = np.zeros((rows, scales.shape[1]), np.uint8)
    for b in range(P // 8):
        out[32 * (b // 4) + b % 4] = scales[b]
    return out


def ref_gather(hw, P, offset=0):
    return np.stack([hw[offset + 32 * (b // 4) + b % 4] for b in range(P // 8)])


def random_words(rng, elem, shape):
    """Random x4 words (no NaN / Inf codes) and the values they pack."""
    n = shape[0] * shape[1] * 4
    if elem == F4:
        codes = rng.integers(0, 16, n, dtype=np.uint8)
    else:
        codes = rng.integers(0, 256, n, dtype=np.uint8)
        vals = codes.view(elem).astype(np.float64)
        codes = np.where(np.isfinite(vals), codes, codes & 0x3F).astype(np.uint8)
    vals = codes.view(elem).reshape(shape[0], shape[1] * 4)
    return mx.pack_x4(vals), vals


def assert_fp32_close(got, exact, bound):
    """One fp32 rounding of the exact result (plus float64 summation-order noise)."""
    got = np.asarray(got, np.float64)
    tol = np.abs(exact) * 2.0 ** -24 + bound * 1e-12 + 1e-300
    bad = np.abs(got - exact) > tol
    assert not bad.any(), (got[bad][:5], exact[bad][:5])


# -- kernels ----------------------------------------------------------------------------------

def matmul_kernel(s_elem, m_elem, out_dtype=dt.float32, scale_dtype=dt.uint8, accumulate=None,
                  calls=1, tile_position=None, tile_size=None):
    def k(sw, ssc, mw, msc):
        K, M = sw.shape
        N = mw.shape[1]
        s = _nd((K, M), X4[s_elem], alloc.sbuf)
        dma.copy(s, sw.view(X4[s_elem]))
        m = _nd((K, N), X4[m_elem], alloc.sbuf)
        dma.copy(m, mw.view(X4[m_elem]))
        ss = _nd(ssc.shape, scale_dtype, alloc.sbuf)
        dma.copy(ss, ssc.view(scale_dtype))
        ms = _nd(msc.shape, scale_dtype, alloc.sbuf)
        dma.copy(ms, msc.view(scale_dtype))
        ps = _nd((M, N), out_dtype, alloc.psum)
        for _ in range(calls):
            mx.nc_matmul_mx(ps, s, m, ss, ms, tile_position=tile_position, tile_size=tile_size,
                            accumulate=accumulate)
        sb = _nd((M, N), out_dtype, alloc.sbuf)
        elementwise.tensor_copy(sb, ps)
        out = _nd((M, N), out_dtype, alloc.shared_hbm)
        dma.copy(out, sb)
        return out
    return k


def make_case(rng, s_elem, m_elem, K, M, N, lo=110, hi=140):
    sw, _ = random_words(rng, s_elem, (K, M))
    mw, _ = random_words(rng, m_elem, (K, N))
    ss = rng.integers(lo, hi, (K // 8, M), dtype=np.uint8)
    ms = rng.integers(lo, hi, (K // 8, N), dtype=np.uint8)
    return sw, ss, mw, ms


def run_matmul(s_elem, m_elem, sw, ss, mw, ms, **kw):
    K = sw.shape[0]
    r = _run(matmul_kernel(s_elem, m_elem, **kw), sw, ref_scatter(ss, K), mw, ref_scatter(ms, K))
    return r


# -- nc_matmul_mx numerics ---------------------------------------------------------------------

@pytest.mark.parametrize("s_elem,m_elem", [(E4, E4), (E5, E5), (E4, E5), (F4, E4), (E5, F4),
                                           (F4, F4)])


def test_matmul_mx_max_tile_matches_float64_reference(s_elem, m_elem):
    rng = np.random.default_rng(7)
    K, M, N = 128, 128, 512
    sw, ss, mw, ms = make_case(rng, s_elem, m_elem, K, M, N)
    r = run_matmul(s_elem, m_elem, sw, ss, mw, ms)
    exact, bound = ref_matmul(sw, s_elem, ss, mw, m_elem, ms)
    assert r.outputs.dtype == np.float32 and r.outputs.shape == (M, N)
    assert_fp32_close(r.outputs, exact, bound)


_ELEMS = st.sampled_from([E4, E5, F4])


@settings(max_examples=30, deadline=None)
@given(s_elem=_ELEMS, m_elem=_ELEMS, K=st.sampled_from([32, 64, 96, 128]),
       half_m=st.integers(1, 64), N=st.integers(1, 600), seed=st.integers(0, 2**31 - 1),
       lo=st.integers(90, 127))


def test_matmul_mx_random_shapes_and_scales(s_elem, m_elem, K, half_m, N, seed, lo):
    rng = np.random.default_rng(seed)
    M = 2 * half_m
    sw, ss, mw, ms = make_case(rng, s_elem, m_elem, K, M, N, lo=lo, hi=lo + 40)
    r = run_matmul(s_elem, m_elem, sw, ss, mw, ms)
    exact, bound = ref_matmul(sw, s_elem, ss, mw, m_elem, ms)
    assert_fp32_close(r.outputs, exact, bound)


def test_matmul_mx_e8m0_scales_and_bf16_psum():
    rng = np.random.default_rng(3)
    K, M, N = 64, 32, 256
    sw, ss, mw, ms = make_case(rng, E4, F4, K, M, N)
    r = run_matmul(E4, F4, sw, ss, mw, ms, out_dtype=dt.bfloat16, scale_dtype=dt.float8_e8m0fnu)
    exact, _ = ref_matmul(sw, E4, ss, mw, F4, ms)
    assert r.outputs.dtype == ml_dtypes.bfloat16
    want = exact.astype(np.float32).astype(ml_dtypes.bfloat16)
    got = r.outputs.astype(np.float64)
    # fp32 result rounded once more to bf16 (RNE): equal, or one bf16 ulp apart on a tie
    ulp = np.abs(want.astype(np.float64)) * 2.0 ** -7
    assert np.all(np.abs(got - want.astype(np.float64)) <= ulp)
    assert np.mean(got == want.astype(np.float64)) > 0.99


def test_matmul_mx_nan_scale_poisons_its_column():
    rng = np.random.default_rng(4)
    K, M, N = 32, 4, 8
    sw, ss, mw, ms = make_case(rng, E5, E5, K, M, N)
    ss[2, 1] = 0xFF  # e8m0 NaN: stationary column 1, rows 16..23
    r = run_matmul(E5, E5, sw, ss, mw, ms)
    assert np.isnan(r.outputs[1]).all()
    assert np.isfinite(np.delete(r.outputs, 1, axis=0)).all()


def test_matmul_mx_row_tiling_accepted():
    rng = np.random.default_rng(5)
    K, M, N = 32, 16, 64
    sw, ss, mw, ms = make_case(rng, E4, E4, K, M, N)
    r = run_matmul(E4, E4, sw, ss, mw, ms, tile_position=(32, 0), tile_size=(32, 128))
    exact, bound = ref_matmul(sw, E4, ss, mw, E4, ms)
    assert_fp32_close(r.outputs, exact, bound)


# -- accumulate semantics -------------------------------------------------------------------

def test_accumulate_none_overwrites_first_then_adds():
    rng = np.random.default_rng(8)
    K, M, N = 64, 16, 32
    sw, ss, mw, ms = make_case(rng, E4, E5, K, M, N)
    exact, bound = ref_matmul(sw, E4, ss, mw, E5, ms)
    one = exact.astype(np.float32)
    r1 = run_matmul(E4, E5, sw, ss, mw, ms, calls=1)      # fresh PSUM is NaN-filled
    np.testing.assert_array_equal(r1.outputs, one)
    r2 = run_matmul(E4, E5, sw, ss, mw, ms, calls=2)
    np.testing.assert_array_equal(r2.outputs, one + one)  # fp32 PSUM add
    r3 = run_matmul(E4, E5, sw, ss, mw, ms, calls=3, accumulate=False)
    np.testing.assert_array_equal(r3.outputs, one)
    ins = [i for i in r2.traces[0].instructions if i.opcode == "nc_matmul_mx"]
    assert len(ins) == 2 and all(i.attr("accumulate") for i in ins)
    ins3 = [i for i in r3.traces[0].instructions if i.opcode == "nc_matmul_mx"]
    assert not any(i.attr("accumulate") for i in ins3)


def test_accumulate_none_is_per_element():
    """None adds only where the PSUM location was written since allocation."""
    rng = np.random.default_rng(9)
    K, M, N = 32, 8, 16
    sw, ss, mw, ms = make_case(rng, E4, E4, K, M, 2 * N)
    msc = ref_scatter(ms, K)

    def k(sw_, ssc, mw_, msc_):
        s = _nd((K, M), dt.float8_e4m3fn_x4, alloc.sbuf)
        dma.copy(s, sw_.view(dt.float8_e4m3fn_x4))
        m = _nd((K, 2 * N), dt.float8_e4m3fn_x4, alloc.sbuf)
        dma.copy(m, mw_.view(dt.float8_e4m3fn_x4))
        ss_ = _nd(ssc.shape, dt.uint8, alloc.sbuf)
        dma.copy(ss_, ssc)
        ms_ = _nd(msc_.shape, dt.uint8, alloc.sbuf)
        dma.copy(ms_, msc_)
        ps = _nd((M, 2 * N), dt.float32, alloc.psum)
        mx.nc_matmul_mx(ps[:, 0:N], s, m[:, 0:N], ss_, ms_[:, 0:N])   # left half only
        mx.nc_matmul_mx(ps, s, m, ss_, ms_)                            # None: add left, set right
        sb = _nd((M, 2 * N), dt.float32, alloc.sbuf)
        elementwise.tensor_copy(sb, ps)
        o = _nd((M, 2 * N), dt.float32, alloc.shared_hbm)
        dma.copy(o, sb)
        return o

    r = _run(k, sw, ref_scatter(ss, K), mw, msc)
    one = ref_matmul(sw, E4, ss, mw, E4, ms)[0].astype(np.float32)
    np.testing.assert_array_equal(r.outputs[:, :N], one[:, :N] + one[:, :N])
    np.testing.assert_array_equal(r.outputs[:, N:], one[:, N:])


@pytest.mark.parametrize("accumulate", [None, True])
def test_accumulate_onto_memset_psum_adds(accumulate):
    rng = np.random.default_rng(10)
    K, M, N = 32, 8, 16
    sw, ss, mw, ms = make_case(rng, E5, F4, K, M, N)

    def k(sw_, ssc, mw_, msc_):
        s = _nd((K, M), dt.float8_e5m2_x4, alloc.sbuf)
        dma.copy(s, sw_.view(dt.float8_e5m2_x4))
        m = _nd((K, N), dt.float4_e2m1fn_x4, alloc.sbuf)
        dma.copy(m, mw_.view(dt.float4_e2m1fn_x4))
        ss_ = _nd(ssc.shape, dt.uint8, alloc.sbuf)
        dma.copy(ss_, ssc)
        ms_ = _nd(msc_.shape, dt.uint8, alloc.sbuf)
        dma.copy(ms_, msc_)
        ps = _nd((M, N), dt.float32, alloc.psum)
        elementwise.memset(current(), None, 1.5, None, dst=ps)
        mx.nc_matmul_mx(ps, s, m, ss_, ms_, accumulate=accumulate)
        sb = _nd((M, N), dt.float32, alloc.sbuf)
        elementwise.tensor_copy(sb, ps)
        o = _nd((M, N), dt.float32, alloc.shared_hbm)
        dma.copy(o, sb)
        return o

    r = _run(k, sw, ref_scatter(ss, K), mw, ref_scatter(ms, K))
    one = ref_matmul(sw, E5, ss, mw, F4, ms)[0].astype(np.float32)
    np.testing.assert_array_equal(r.outputs, one + np.float32(1.5))


def test_bf16_psum_accumulate_upcasts_adds_in_fp32_and_rounds():
    rng = np.random.default_rng(11)
    K, M, N = 32, 8, 64
    sw, ss, mw, ms = make_case(rng, E4, E4, K, M, N)
    r = run_matmul(E4, E4, sw, ss, mw, ms, out_dtype=dt.bfloat16, calls=2)
    one = ref_matmul(sw, E4, ss, mw, E4, ms)[0].astype(np.float32)
    first = one.astype(ml_dtypes.bfloat16).astype(np.float32)
    want = (first + one).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(r.outputs.astype(np.float32), want.astype(np.float32))


# -- trace ---------------------------------------------------------------------------------------

def test_matmul_mx_trace_attrs():
    rng = np.random.default_rng(12)
    K, M, N = 128, 64, 128
    sw, ss, mw, ms = make_case(rng, F4, E4, K, M, N)
    r = run_matmul(F4, E4, sw, ss, mw, ms)
    (ins,) = [i for i in r.traces[0].instructions if i.opcode == "nc_matmul_mx"]
    assert ins.engine == "tensor"
    assert ins.attr("mx") is True
    assert ins.attr("contraction") == 512
    assert ins.attr("moving_free") == N and ins.attr("stationary_free") == M
    assert ins.dtype_out == "float32"
    assert ins.writes[0].memory == "psum"
    # the scale reads name the 4 rows of every quadrant
    scale_reads = [rg for rg in ins.reads if rg.dtype == "uint8"]
    assert sorted({rg.partition for rg in scale_reads}) == [0, 32, 64, 96]
    assert all(rg.partitions == 4 for rg in scale_reads)


# -- quantize_mx ------------------------------------------------------------------------------

def scales_out(sc, P, F, offset=0):
    """Copy the scale rows of every quadrant (rows offset + 32q .. +3) to a contiguous HBM
    [P // 8, F] tensor (what the docs' CPU utilities call contiguous scales)."""
    o = _nd((P // 8, F), sc.dtype, alloc.shared_hbm)
    for q in range(P // 32):
        r0 = offset + 32 * q
        dma.copy(o[4 * q:4 * q + 4, :], sc[r0:r0 + 4, 0:F])
    return o


def quantize_kernel(out_dt, scale_dtype=dt.uint8):
    def k(x):
        P, F = x.shape
        Fq = F // 4
        s = _nd((P, F), x.dtype, alloc.sbuf)
        dma.copy(s, x)
        d = _nd((P, Fq), out_dt, alloc.sbuf)
        sc = _nd((4 if P == 32 else P, Fq), scale_dtype, alloc.sbuf)
        mx.quantize_mx(d, s, sc)
        od = _nd((P, Fq), out_dt, alloc.shared_hbm)
        dma.copy(od, d)
        return od, scales_out(sc, P, Fq)
    return k


def ref_scale_byte(block, emax):
    amax = float(np.max(np.abs(block)))
    if amax == 0:
        return 0
    e = math.floor(math.log2(amax)) - (emax - 1) + 127
    return min(max(e, 0), 254)


@pytest.mark.parametrize("elem,emax", [(E4, 8), (E5, 15)])
def test_quantize_mx_scale_rule_on_hand_made_blocks(elem, emax):
    P, F = 32, 8      # 4 x 2 scaling groups
    x = np.zeros((P, F), np.float32)
    blocks = {  # (group row b, x4 column f) -> values placed in that 8 x 4 block
        (0, 0): [1.0, -0.5, 0.25],
        (0, 1): [],                               # all zero
        (1, 0): [448.0, 3.0],
        (1, 1): [-0.75, 0.1],
        (2, 0): [2.0 ** -130, 2.0 ** -131],       # bf16 subnormals: scale clamps to 2^-127
        (2, 1): [255.0, -256.0 + 1],
        (3, 0): [3.0 * 2.0 ** 100],
        (3, 1): [-1.5 * 2.0 ** -20, 2.0 ** -30],
    }
    for (b, f), vals in blocks.items():
        for i, v in enumerate(vals):
            x[8 * b + i, 4 * f + (i % 4)] = v
    xb = x.astype(ml_dtypes.bfloat16)
    r = _run(quantize_kernel(X4[elem]), xb)
    words, hw = r.outputs
    assert words.dtype == np.uint32 and words.shape == (P, F // 4)
    assert hw.shape == (4, F // 4) and hw.dtype == np.uint8
    xs = xb.astype(np.float64)
    for (b, f) in blocks:
        want = ref_scale_byte(xs[8 * b:8 * b + 8, 4 * f:4 * f + 4], emax)
        assert hw[b, f] == want, ((b, f), hw[b, f], want)
    assert hw[0, 1] == 0                        # zero block -> 2^-127
    assert hw[0, 0] == 127 - (emax - 1)         # amax 1.0
    assert hw[2, 0] == 0                        # clamped
    # elements: value / X rounded to nearest even, exactly
    X = 2.0 ** (np.repeat(np.repeat(hw.astype(np.float64), 8, 0), 4, 1) - 127)
    want_codes = (xs / X).astype(np.float32).astype(elem)
    got = ref_values(words, elem).reshape(P, F)
    np.testing.assert_array_equal(got, want_codes.astype(np.float64))
    # the 2x scale keeps every block's largest value below 2^Emax before rounding (255 -> 256
    # here), far from the format's max: never saturates
    assert np.all(np.abs(got) <= 2.0 ** emax)
    assert got[8 * 2, 4 * 1] == 2.0 ** emax


def test_quantize_mx_non_finite_group_is_nan():
    """Undocumented on hardware; trnsim's choice: scale 0xFF (E8M0 NaN), NaN elements."""
    x = np.ones((32, 8), np.float32)
    x[3, 5] = np.inf
    x[9, 0] = np.nan
    r = _run(quantize_kernel(dt.float8_e4m3fn_x4), x.astype(ml_dtypes.bfloat16))
    words, sc = r.outputs
    assert sc[0, 1] == 0xFF and sc[1, 0] == 0xFF
    assert (np.delete(sc.reshape(-1), [1, 2]) == 127 - 7).all()
    vals = ref_values(words, E4).reshape(32, 8)
    assert np.isnan(vals[0:8, 4:8]).all() and np.isnan(vals[8:16, 0:4]).all()
    assert (vals[16:, :] == 128.0).all()


@settings(max_examples=20, deadline=None)
@given(elem=st.sampled_from([E4, E5]), src=st.sampled_from(["bf16", "fp16"]),
       P=st.sampled_from([32, 64, 96, 128]), Fq=st.integers(1, 48),
       seed=st.integers(0, 2**31 - 1), log_range=st.integers(0, 12))


def test_quantize_mx_round_trip(elem, src, P, Fq, seed, log_range):
    rng = np.random.default_rng(seed)
    F = 4 * Fq
    mag = 2.0 ** rng.uniform(-log_range, log_range, (P, F))
    x = (rng.choice([-1.0, 1.0], (P, F)) * mag * rng.uniform(0.5, 1.0, (P, F)))
    x[rng.random((P, F)) < 0.05] = 0.0
    if rng.random() < 0.5:
        x[:8, :4] = 0.0                           # one all-zero block
    xd = x.astype(ml_dtypes.bfloat16 if src == "bf16" else np.float16)
    r = _run(quantize_kernel(X4[elem]), xd)
    words, sc = r.outputs
    assert sc.shape == (P // 8, Fq)
    xs = xd.astype(np.float64)
    emax = 8 if elem == E4 else 15
    for b in range(P // 8):
        for f in range(Fq):
            assert sc[b, f] == ref_scale_byte(xs[8 * b:8 * b + 8, 4 * f:4 * f + 4], emax)
    deq = ref_dequant(words, elem, sc).reshape(P, F)
    X = 2.0 ** (np.repeat(np.repeat(sc.astype(np.float64), 8, 0), 4, 1) - 127)
    info = ml_dtypes.finfo(elem)
    # within half an ulp of the element format (relative), or half its smallest subnormal x X
    tol = np.maximum(np.abs(xs) * 2.0 ** -(info.nmant + 1), X * float(info.smallest_subnormal) / 2)
    assert np.all(np.abs(deq - xs) <= tol)
    assert np.all(deq[xs == 0] == 0)


def test_quantize_mx_e8m0_scale_tile_and_packed_offsets_feed_matmul():
    """Two QuantizeMX calls pack their scales into one tile at offsets 0 and 4 (docs'
    packed-scale kernel); nc_matmul_mx reads them back through the sliced views."""
    rng = np.random.default_rng(13)
    K, M, N = 128, 64, 128
    a = rng.standard_normal((K, 4 * M)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, 4 * N)).astype(ml_dtypes.bfloat16)

    def k(a_, b_):
        sa = _nd((K, 4 * M), dt.bfloat16, alloc.sbuf)
        dma.copy(sa, a_)
        sb = _nd((K, 4 * N), dt.bfloat16, alloc.sbuf)
        dma.copy(sb, b_)
        qa = _nd((K, M), dt.float8_e4m3fn_x4, alloc.sbuf)
        qb = _nd((K, N), dt.float8_e5m2_x4, alloc.sbuf)
        packed = _nd((K, N), dt.float8_e8m0fnu, alloc.sbuf)
        mx.quantize_mx(qa, sa, packed[0:, 0:M])
        mx.quantize_mx(qb, sb, packed[4:, :])
        ps = _nd((M, N), dt.float32, alloc.psum)
        mx.nc_matmul_mx(ps, qa, qb, packed[0:, 0:M], packed[4:, :])
        res = _nd((M, N), dt.float32, alloc.sbuf)
        elementwise.tensor_copy(res, ps)
        o = _nd((M, N), dt.float32, alloc.shared_hbm)
        dma.copy(o, res)
        wa = _nd((K, M), dt.float8_e4m3fn_x4, alloc.shared_hbm)
        dma.copy(wa, qa)
        wb = _nd((K, N), dt.float8_e5m2_x4, alloc.shared_hbm)
        dma.copy(wb, qb)
        return o, wa, wb, scales_out(packed, K, M, 0), scales_out(packed, K, N, 4)

    r = _run(k, a, b)
    out, wa, wb, ssa, ssb = r.outputs
    assert ssa.dtype == dt.float8_e8m0fnu
    ssa, ssb = ssa.view(np.uint8), ssb.view(np.uint8)
    exact, bound = ref_matmul(wa, E4, ssa, wb, E5, ssb)
    assert_fp32_close(out, exact, bound)
    # and close to the unquantized product (K = 512; e5m2 keeps 2 mantissa bits, e4m3fn 3)
    full = np.einsum("kiq,kjq->ij", a.astype(np.float64).reshape(K, M, 4),
                     b.astype(np.float64).reshape(K, N, 4))
    rms = lambda v: float(np.sqrt(np.mean(np.square(v))))  # noqa: E731
    assert rms(out - full) < 0.15 * rms(full)
    q = [i for i in r.traces[0].instructions if i.opcode == "quantize_mx"]
    assert len(q) == 2 and all(i.engine == "vector" and i.attr("mx") for i in q)
    assert q[1].writes[1].partition == 4 and q[1].writes[1].partitions == 4


@pytest.mark.parametrize("elem", [E4, F4])
def test_uint8_host_data_viewed_as_x4_like_the_docs(elem):
    """The docs' kernels receive MX data as uint8 bytes and reinterpret it in the kernel, with
    .view(dtype) or .ap(dtype=..., pattern=...)."""
    rng = np.random.default_rng(14)
    K, M, N = 32, 8, 16
    sw, ss, mw, ms = make_case(rng, elem, elem, K, M, N)
    sb = np.ascontiguousarray(sw).view(np.uint8)          # [K, 4M] (fp8) / [K, 2M] (fp4)
    mb = np.ascontiguousarray(mw).view(np.uint8)

    def k(sbytes, ssc, mbytes, msc):
        xs = sbytes.ap(dtype=X4[elem], pattern=[[M, K], [1, M]], offset=0)
        xm = mbytes.view(X4[elem])
        assert tuple(xs.shape) == (K, M) and tuple(xm.shape) == (K, N)
        s = _nd((K, M), X4[elem], alloc.sbuf)
        dma.copy(s, xs)
        m = _nd((K, N), X4[elem], alloc.sbuf)
        dma.copy(m, xm)
        ss_ = _nd(ssc.shape, dt.uint8, alloc.sbuf)
        dma.copy(ss_, ssc)
        ms_ = _nd(msc.shape, dt.uint8, alloc.sbuf)
        dma.copy(ms_, msc)
        ps = _nd((M, N), dt.float32, alloc.psum)
        mx.nc_matmul_mx(ps, s, m, ss_, ms_)
        res = _nd((M, N), dt.float32, alloc.sbuf)
        elementwise.tensor_copy(res, ps)
        o = _nd((M, N), dt.float32, alloc.shared_hbm)
        dma.copy(o, res)
        return o

    r = _run(k, sb, ref_scatter(ss, K), mb, ref_scatter(ms, K))
    exact, bound = ref_matmul(sw, elem, ss, mw, elem, ms)
    assert_fp32_close(r.outputs, exact, bound)


# -- host helpers ------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(elem=_ELEMS, rows=st.integers(1, 5), cols=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_pack_unpack_round_trip_and_docs_layout(elem, rows, cols, seed):
    rng = np.random.default_rng(seed)
    words, vals = random_words(rng, elem, (rows, cols))
    assert words.dtype == WORD[elem] and words.shape == (rows, cols)
    back = mx.unpack_x4(words, elem)
    assert back.dtype == elem
    np.testing.assert_array_equal(back.view(np.uint8), vals.view(np.uint8))
    np.testing.assert_array_equal(ref_values(words, elem).reshape(rows, 4 * cols),
                                  vals.astype(np.float64))
    if elem == F4:   # the docs' host mimicry: 2 fp4 per byte, low nibble first
        b = vals.view(np.uint8).reshape(rows, 2 * cols, 2)
        docs = (b[..., 0] & 0xF) | ((b[..., 1] & 0xF) << 4)
        np.testing.assert_array_equal(docs.astype(np.uint8).view(np.uint16), words)
        np.testing.assert_array_equal(mx.unpack_x4(docs.astype(np.uint8), elem).view(np.uint8),
                                      vals.view(np.uint8))
    else:            # fp8: the uint32 view of the values
        np.testing.assert_array_equal(np.ascontiguousarray(vals).view(np.uint32), words)
    assert mx.unpack_x4(words, X4[elem]).dtype == elem


def test_scatter_gather_scales_helpers():
    s = np.arange(16 * 3, dtype=np.uint8).reshape(16, 3)
    hw = mx.scatter_scales(s, 128)
    np.testing.assert_array_equal(hw, ref_scatter(s, 128))
    np.testing.assert_array_equal(mx.gather_scales(hw, 128), s)
    np.testing.assert_array_equal(ref_gather(hw, 128), s)
    small = mx.scatter_scales(s[:4], 32)
    assert small.shape == (4, 3)
    np.testing.assert_array_equal(mx.scatter_scales(s, 128, offset=8)[8:12], s[:4])
    np.testing.assert_array_equal(mx.scatter_scales(s, 128, offset=8)[40:44], s[4:8])
    x = np.random.default_rng(0).standard_normal((32, 16))
    np.testing.assert_array_equal(mx.quantize_block_scales(x, E4),
                                  [[ref_scale_byte(x[8 * b:8 * b + 8, 4 * f:4 * f + 4], 8)
                                    for f in range(4)] for b in range(4)])


# -- hardware rules -----------------------------------------------------------------------------

def _err_kernel(K=32, M=4, N=8, data_dt=dt.float8_e4m3fn_x4, scale_dt=dt.uint8, scale_rows=None,
                scale_off=0, dst_mem="psum", tile_position=None, tile_size=None, dst_none=False):
    """Operands are allocated as uint32/uint16 and viewed as x4 so the same kernel runs on any
    target (x4 allocations themselves are gen4-only dtypes)."""
    def k():
        base_t = dt.uint16 if dt.storage_dtype(data_dt) == dt.uint16 else dt.uint32
        s = _nd((K, M), base_t, alloc.sbuf).view(data_dt) if dt.is_packed(data_dt) \
            else _nd((K, M), data_dt, alloc.sbuf)
        m = _nd((K, N), base_t, alloc.sbuf).view(data_dt) if dt.is_packed(data_dt) \
            else _nd((K, N), data_dt, alloc.sbuf)
        rows = scale_rows or (4 if K <= 32 else K)
        ss = _nd((rows + scale_off, M), scale_dt, alloc.sbuf)[scale_off:, :]
        ms = _nd((rows + scale_off, N), scale_dt, alloc.sbuf)[scale_off:, :]
        dst = None if dst_none else _nd((M, N), dt.float32,
                                        alloc.psum if dst_mem == "psum" else alloc.sbuf)
        mx.nc_matmul_mx(dst, s, m, ss, ms, tile_position=tile_position, tile_size=tile_size)
    return k


def test_trn2_target_rejects_nc_matmul_mx():
    with pytest.raises(KernelError) as e:
        _run(_err_kernel(), target="trn2")
    assert e.value.rule == "generation"
    with pytest.raises(KernelError) as e:
        _run(_err_kernel(), target="trn1")
    assert e.value.rule == "generation"


def test_trn2_target_rejects_quantize_mx():
    def k():
        s = _nd((32, 16), dt.bfloat16, alloc.sbuf)
        d = _nd((32, 4), dt.uint32, alloc.sbuf).view(dt.float8_e4m3fn_x4)
        sc = _nd((4, 4), dt.uint8, alloc.sbuf)
        mx.quantize_mx(d, s, sc)
    with pytest.raises(KernelError) as e:
        _run(k, target="trn2")
    assert e.value.rule == "generation"


def test_x4_allocation_is_gen4_only():
    def k():
        _nd((32, 4), dt.float8_e4m3fn_x4, alloc.sbuf)
    with pytest.raises(KernelError) as e:
        _run(k, target="trn2")
    assert e.value.rule == "generation" and e.value.limit == "gen4+"


@pytest.mark.parametrize("kw,cls,rule", [
    (dict(K=48), ShapeError, "mx-partition-multiple"),
    (dict(K=16), ShapeError, "mx-partition-multiple"),
    (dict(M=3), ShapeError, "mx-stationary-free-even"),
    (dict(M=130, dst_none=True), ShapeError, "matmul-stationary-free"),
    (dict(scale_dt=dt.float32), DtypeError, "mx-scale-dtype"),
    (dict(scale_dt=dt.int8), DtypeError, "mx-scale-dtype"),
    (dict(data_dt=dt.bfloat16), DtypeError, "mx-input-dtype"),
    (dict(data_dt=dt.uint32), DtypeError, "mx-input-dtype"),
    (dict(K=64, scale_rows=8), ShapeError, "mx-scale-partitions"),
    (dict(K=128, scale_rows=99), ShapeError, "mx-scale-partitions"),
    (dict(scale_off=2, scale_rows=4), ShapeError, "mx-scale-offset"),
    (dict(dst_mem="sbuf"), MemoryAccessError, "matmul-dst-psum"),
    (dict(tile_position=(0, 64), tile_size=(32, 64)), KernelError, "mx-row-tiling-only"),
    (dict(K=64, tile_position=(64, 0), tile_size=(32, 128)), ShapeError, "matmul-tiling-size"),
    (dict(tile_position=(32, 0), tile_size=(64, 128)), KernelError, "matmul-tiling-bounds"),
    (dict(tile_position=(0, 0)), KernelError, "matmul-tiling"),
    (dict(N=4097, dst_none=True), ShapeError, "matmul-moving-free"),
])


def test_matmul_mx_rule_errors(kw, cls, rule):
    with pytest.raises(cls) as e:
        _run(_err_kernel(**kw))
    assert e.value.rule == rule, str(e.value)


def test_matmul_mx_accepts_offset_scale_views_and_fp4_data():
    # offsets 4/8/12 inside the quadrant, P = 128 needs rows up to 32 * 3 + 4
    _run(_err_kernel(K=128, scale_off=12, scale_rows=100, data_dt=dt.float4_e2m1fn_x4))


def test_matmul_mx_scale_in_another_quadrant_is_rejected():
    def k():
        s = _nd((64, 4), dt.float8_e4m3fn_x4, alloc.sbuf)[32:64, :]
        m = _nd((64, 8), dt.float8_e4m3fn_x4, alloc.sbuf)[32:64, :]
        ss = _nd((4, 4), dt.uint8, alloc.sbuf)     # partitions 0..3, data in quadrant 1
        ms = _nd((4, 8), dt.uint8, alloc.sbuf)
        mx.nc_matmul_mx(_nd((4, 8), dt.float32, alloc.psum), s, m, ss, ms)
    with pytest.raises(ShapeError) as e:
        _run(k)
    assert e.value.rule == "mx-scale-quadrant"

    def ok():  # the same data with its scales in quadrant 1 (offset 8) is fine
        s = _nd((64, 4), dt.float8_e4m3fn_x4, alloc.sbuf)
        m = _nd((64, 8), dt.float8_e4m3fn_x4, alloc.sbuf)
        ss = _nd((64, 4), dt.uint8, alloc.sbuf)
        ms = _nd((64, 8), dt.uint8, alloc.sbuf)
        for t, v in ((s.view(dt.uint32), 0), (m.view(dt.uint32), 0), (ss, 127), (ms, 127)):
            elementwise.memset(current(), None, v, None, dst=t)
        ps = _nd((4, 8), dt.float32, alloc.psum)
        mx.nc_matmul_mx(ps, s[32:64, :], m[32:64, :], ss[40:44, :], ms[40:44, :])
    _run(ok)


def test_matmul_mx_operands_must_be_in_sbuf():
    def k():
        s = _nd((32, 4), dt.float8_e4m3fn_x4, alloc.sbuf)
        m = _nd((32, 8), dt.float8_e4m3fn_x4, alloc.sbuf)
        ss = _nd((4, 4), dt.uint8, alloc.psum)
        ms = _nd((4, 8), dt.uint8, alloc.sbuf)
        mx.nc_matmul_mx(_nd((4, 8), dt.float32, alloc.psum), s, m, ss, ms)
    with pytest.raises(MemoryAccessError):
        _run(k)


@pytest.mark.parametrize("what,cls,rule", [
    ("fp4_out", DtypeError, "quantize-mx-output-dtype"),
    ("fp32_in", DtypeError, "quantize-mx-input-dtype"),
    ("scale_int32", DtypeError, "mx-scale-dtype"),
    ("p48", ShapeError, "mx-partition-multiple"),
    ("free6", ShapeError, "quantize-mx-free-multiple"),
    ("scale_free", ShapeError, "mx-scale-free-size"),
    ("scale_rows", ShapeError, "mx-scale-partitions"),
    ("dst_shape", ShapeError, "dst-shape"),
    ("psum_src", MemoryAccessError, "operand-memory"),
])


def test_quantize_mx_rule_errors(what, cls, rule):
    def k():
        P = 48 if what == "p48" else 64
        F = 6 if what == "free6" else 16
        sdt = dt.float32 if what == "fp32_in" else dt.bfloat16
        s = _nd((P, F), sdt, alloc.psum if what == "psum_src" else alloc.sbuf)
        odt = dt.float4_e2m1fn_x4 if what == "fp4_out" else dt.float8_e5m2_x4
        d = _nd((P, F // 4 + (1 if what == "dst_shape" else 0)), odt, alloc.sbuf)
        scdt = dt.int32 if what == "scale_int32" else dt.uint8
        rows = 8 if what == "scale_rows" else P
        sc = _nd((rows, F // 4 + (1 if what == "scale_free" else 0)), scdt, alloc.sbuf)
        mx.quantize_mx(d, s, sc)
    with pytest.raises(cls) as e:
        _run(k)
    assert e.value.rule == rule, str(e.value)


def test_x4_dma_moves_raw_bits_and_refuses_casts():
    words = np.random.default_rng(1).integers(0, 2**32, (32, 8), dtype=np.uint32)

    def k(w):
        t = _nd((32, 8), dt.float8_e5m2_x4, alloc.sbuf)
        dma.copy(t, w.view(dt.float8_e5m2_x4))
        o = _nd((32, 8), dt.uint32, alloc.shared_hbm)
        dma.copy(o, t)
        o2 = _nd((32, 8), dt.float8_e5m2_x4, alloc.shared_hbm)
        dma.copy(o2, t)
        return o, o2

    o, o2 = _run(k, words).outputs
    np.testing.assert_array_equal(o, words)
    np.testing.assert_array_equal(o2.view(np.uint32), words)

    def bad(w):
        t = _nd((32, 8), dt.float8_e5m2_x4, alloc.sbuf)
        dma.copy(t, w.view(dt.float8_e5m2_x4))
        o = _nd((32, 8), dt.float32, alloc.shared_hbm)
        dma.copy(o, t)
        return o

    with pytest.raises(DtypeError) as e:
        _run(bad, words)
    assert e.value.rule == "dma-mx-cast"


# ------------------------------------------------------------------ host static_cast to/from x4
def test_static_cast_packs_four_values_per_x4_element_by_hand():
    from trnsim.frontends.nki import language as nl
    a = np.array([[1.0, 2.0, -0.5, 448.0, 0.25, 3.0, 4.0, 6.0]], dtype=np.float32)
    w = nl.static_cast(a, nl.float8_e4m3fn_x4)
    assert w.dtype == dt.float8_e4m3fn_x4 and w.shape == (1, 2)       # [.., 8] -> [.., 2]
    # e4m3fn (bias 7): 1.0 = 0x38, 2.0 = 0x40, -0.5 = 0xB0, 448 = 0x7E; 0.25 = 0x28, 3 = 0x44,
    # 4 = 0x48, 6 = 0x4C; value j in byte j, least significant first
    assert w.view(np.uint32).tolist() == [[0x7EB04038, 0x4C484428]]
    # e2m1 (bias 1): 1 = 0x2, 2 = 0x4, -0.5 = 0x9, 448 saturates to 6 = 0x7; nibble j = value j
    w4 = nl.static_cast(a, nl.float4_e2m1fn_x4)
    assert w4.dtype == dt.float4_e2m1fn_x4 and w4.shape == (1, 2)
    assert int(w4.view(np.uint16)[0, 0]) == 0x7942
    # and back: x4 [.., 2] -> float32 [.., 8] / the element type, values as written
    np.testing.assert_array_equal(nl.static_cast(w, np.float32), a)
    e = nl.static_cast(w, nl.float8_e4m3fn)
    assert e.dtype == E4 and e.shape == (1, 8)
    np.testing.assert_array_equal(nl.static_cast(w4, np.float32)[0, :4], [1.0, 2.0, -0.5, 6.0])


def test_static_cast_x4_odd_last_axis_is_refused_by_name():
    from trnsim.frontends.nki import language as nl
    with pytest.raises(ShapeError) as e:
        nl.static_cast(np.ones((2, 6), np.float32), nl.float8_e5m2_x4)
    assert e.value.rule == "mx-pack-shape" and "(2, 6)" in str(e.value)


def test_static_cast_x4_weights_reach_a_kernel_as_packed_words():
    from trnsim.frontends.nki import language as nl
    vals = (np.arange(128, dtype=np.float32).reshape(32, 4) % 16 - 8) / 2   # k/2, |k| <= 8: exact
    w = nl.static_cast(vals, nl.float8_e4m3fn_x4)                       # [32, 1] x4

    def k(x):
        assert x.dtype == dt.float8_e4m3fn_x4 and tuple(x.shape) == (32, 1)
        t = _nd((32, 1), dt.float8_e4m3fn_x4, alloc.sbuf)
        dma.copy(t, x)
        o = _nd((32, 1), dt.uint32, alloc.shared_hbm)
        dma.copy(o, t)
        return o

    o = _run(k, w).outputs                                               # one output: the array
    back = o.view(np.uint8).reshape(32, 4).view(E4).astype(np.float32)   # bytes j = value j
    np.testing.assert_array_equal(back, vals)
