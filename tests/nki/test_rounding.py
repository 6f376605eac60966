"""Rounding of engine and DMA writes, driven through real kernel writes (tensor_copy on Vector and
GpSimd, activation(copy) on Scalar, dma_copy casts, nl.load(dtype=), tile assignment):

- fp32 -> bf16 / fp16 / fp8 e4m3 (NKI's +-240 format with inf) / e5m2 / e4m3fn (OCP, +-448,
  trn3 only): round to nearest even, bit-exact against ml_dtypes ``astype`` over every class of
  fp32 bit pattern (normals of all binades, fp32 subnormals, every representable target value,
  every exact halfway point between neighbours and the fp32 values either side of it, target
  subnormals and underflow, overflow around the largest finite value, +-0, +-inf, NaNs);
- fp32 -> tfloat32 against a hand-written bit manipulation;
- float -> int as numerics.toml chooses (round half to even, saturate, NaN -> 0) against an
  independent numpy reference;
- stochastic rounding (NEURON_RT_STOCHASTIC_ROUNDING_EN=1, here Options(stochastic_rounding=True))
  returns one of the two neighbours, is unbiased within a Hoeffding bound, and is reproducible
  for a seed.
"""
import math
import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from test_ops_common import (BF16, E4M3, E4M3FN, E5M2, F16, FEW, assert_exact, legacy, round_f2i,
                             run, seeds)

TARGETS = [BF16, F16, E4M3, E5M2, E4M3FN]
PATHS = ["vector", "gpsimd", "scalar", "dma", "load", "assign"]


def _target_for(dt):
    return "trn3" if dt == E4M3FN else "trn2"  # float8_e4m3fn is gen4 only [ISA]


def _convert_kernel(dst_dt, path):
    """A kernel writing its fp32 input (P, F) into a ``dst_dt`` tile through ``path`` and storing
    that tile unchanged (same dtype) to HBM."""
    nki, nl, nisa = legacy()

    @nki.jit
    def k(x):
        shape = x.shape
        out = nl.ndarray(shape, dtype=dst_dt, buffer=nl.shared_hbm)
        if path == "dma":
            t = nl.ndarray(shape, dtype=dst_dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
        elif path == "load":
            t = nl.load(x, dtype=dst_dt)
        else:
            s = nl.load(x)
            if path == "vector":
                t = nisa.tensor_copy(s, dtype=dst_dt, engine=nisa.vector_engine)
            elif path == "gpsimd":
                t = nisa.tensor_copy(s, dtype=dst_dt, engine=nisa.gpsimd_engine)
            elif path == "scalar":
                t = nisa.activation(op=nl.copy, data=s, dtype=dst_dt)
            else:
                t = nl.ndarray(shape, dtype=dst_dt, buffer=nl.sbuf)
                t[...] = s
        nl.store(out, value=t)
        return out

    return k


def _as_tiles(v32: np.ndarray, F: int = 2048) -> np.ndarray:
    """Pad a flat fp32 array to (P, F) tiles: a list of (<=128, F) arrays."""
    n = v32.size
    rows = -(-n // F)
    pad = np.zeros(rows * F, np.float32)
    pad[:n] = v32
    return [pad.reshape(rows, F)[i:i + 128] for i in range(0, rows, 128)], n


def _write_through_kernel(v32, dst_dt, path, **opts):
    tiles, n = _as_tiles(v32)
    k = _convert_kernel(dst_dt, path)
    outs = [run(k, t, target=_target_for(dst_dt), **opts) for t in tiles]
    return np.concatenate([o.reshape(-1) for o in outs])[:n]


# --------------------------------------------------------------------------------------------
# fp32 bit-pattern classes for a target format

def _finite_target_values(dt) -> np.ndarray:
    """Every finite value of an 8- or 16-bit float format, ascending, as float64."""
    bits = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint64).astype(
        {1: np.uint8, 2: np.uint16}[dt.itemsize])
    v = bits.view(dt).astype(np.float64)
    v = np.unique(v[np.isfinite(v)])  # also merges +0 / -0
    return v


def _f32_bits(u: np.ndarray) -> np.ndarray:
    return np.asarray(u, np.uint32).view(np.float32)


def fp32_classes(dt, rng) -> dict:
    vals = _finite_target_values(dt)
    fi = ml_dtypes.finfo(dt) if dt != F16 else np.finfo(np.float16)
    big = float(fi.max)
    tiny = float(fi.smallest_subnormal)
    c = {}
    # normals over the whole fp32 exponent range, both signs
    c["normals"] = _f32_bits(rng.integers(0x00800000, 0x7F800000, 4096, dtype=np.uint64)
                             | (rng.integers(0, 2, 4096, dtype=np.uint64) << 31))
    # normals within the target's range (the interesting binades)
    e = rng.uniform(np.log2(tiny) - 2, np.log2(big) + 1, 8192)
    c["in_range"] = (np.exp2(e) * rng.choice([-1, 1], e.size)).astype(np.float32)
    c["fp32_subnormals"] = _f32_bits(rng.integers(1, 0x00800000, 1024, dtype=np.uint64)
                                     | (rng.integers(0, 2, 1024, dtype=np.uint64) << 31))
    pos = vals[vals >= 0]
    c["representable"] = np.concatenate([pos, -pos]).astype(np.float32)
    mids = (pos[:-1] + pos[1:]) / 2  # exact halfway points (all exactly representable in fp32)
    m32 = mids.astype(np.float32)
    assert np.array_equal(m32.astype(np.float64), mids)
    c["ties"] = np.concatenate([m32, -m32])
    c["tie_plus"] = np.nextafter(c["ties"], np.float32(np.inf))
    c["tie_minus"] = np.nextafter(c["ties"], np.float32(-np.inf))
    # around the largest finite value: the overflow threshold (max + ulp/2) and beyond
    ulp_top = pos[-1] - pos[-2]
    thr = np.float64(big) + ulp_top / 2
    edge = np.array([big, thr, np.nextafter(np.float32(thr), np.float32(0)),
                     np.nextafter(np.float32(thr), np.float32(np.inf)), big * 1.5, big * 2,
                     1e30, 3.4e38], np.float64)
    edge = edge[np.abs(edge) <= np.finfo(np.float32).max].astype(np.float32)
    c["overflow"] = np.concatenate([edge, -edge])
    # underflow: below / at / above half the smallest subnormal
    und = np.array([tiny / 2, tiny / 4, tiny * 0.75, tiny * 1.5, tiny / 2 * (1 + 2 ** -20),
                    tiny / 2 * (1 - 2 ** -20)], np.float64).astype(np.float32)
    c["underflow"] = np.concatenate([und, -und])
    nan_bits = (np.uint64(0x7F800000) | rng.integers(1, 0x00800000, 64, dtype=np.uint64)
                | (rng.integers(0, 2, 64, dtype=np.uint64) << 31))
    c["specials"] = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf], np.float32),
                                    _f32_bits(nan_bits)])
    return {k: np.asarray(v, np.float32) for k, v in c.items()}


def _hand_bf16(v32: np.ndarray) -> np.ndarray:
    """RNE fp32 -> bf16 by bit manipulation (independent of ml_dtypes): add 0x7FFF plus the
    kept LSB, truncate; NaN stays NaN."""
    b = v32.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(v32)
    r[nan] = 0x7FC0
    return r.view(BF16)


@pytest.mark.parametrize("dt", TARGETS, ids=lambda d: str(d))
def test_rne_reference_classes_are_sane(dt):
    """The classes really hit ties, and ml_dtypes agrees with a hand RNE for bf16."""
    rng = np.random.default_rng(1)
    cl = fp32_classes(dt, rng)
    lo = np.nextafter(cl["ties"], np.float32(-np.inf)).astype(dt).astype(np.float64)
    hi = np.nextafter(cl["ties"], np.float32(np.inf)).astype(dt).astype(np.float64)
    assert np.all(lo != hi)  # each tie sits exactly between two different neighbours
    if dt == BF16:
        allv = np.concatenate(list(cl.values()))
        assert_exact(_hand_bf16(allv), allv.astype(BF16))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dt", TARGETS, ids=lambda d: str(d))
def test_rne_writes_bit_exact_against_ml_dtypes(dt, path):
    rng = np.random.default_rng(zlib.crc32(f"{dt}{path}".encode()))
    for name, v in fp32_classes(dt, rng).items():
        with np.errstate(over="ignore"):
            ref = v.astype(dt)
        got = _write_through_kernel(v, dt, path)
        assert got.dtype == dt
        # activation computes data*scale + bias; with the implicit +0.0 bias, -0 may become +0
        # (undocumented either way), so the Scalar path does not check the sign of zero
        assert_exact(got, ref, what=f"{path} {name}", signed_zero=path != "scalar")


@pytest.mark.parametrize("src", [BF16, F16, E4M3, E5M2])
@pytest.mark.parametrize("dst", [BF16, F16, E4M3, E5M2])
def test_low_precision_to_low_precision_goes_through_fp32(src, dst):
    """Every value of ``src`` (exact in fp32) re-rounded into ``dst`` with one RNE step."""
    if src == dst:
        return
    nki, nl, nisa = legacy()
    bits = np.arange(2 ** (8 * src.itemsize)).astype({1: np.uint8, 2: np.uint16}[src.itemsize])
    x = bits.view(src)
    n = x.size
    F = 512
    rows = -(-n // F)
    xp = np.zeros(rows * F, src)
    xp[:n] = x
    outs = []
    for i in range(0, rows, 128):
        tile_in = xp.reshape(rows, F)[i:i + 128]
        outs.append(run(_copy_kernel(dst), tile_in).reshape(-1))
    got = np.concatenate(outs)[:n]
    with np.errstate(over="ignore"):
        ref = x.astype(np.float32).astype(dst)
    assert_exact(got, ref)


def _copy_kernel(dst):
    nki, nl, nisa = legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=dst, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.tensor_copy(nl.load(x), dtype=dst))
        return out
    return k


# --------------------------------------------------------------------------------------------
# tfloat32

def _hand_tf32(v32: np.ndarray) -> np.ndarray:
    """RNE to 10 explicit mantissa bits, kept in an fp32 container: add 0xFFF plus the kept LSB
    (bit 13) and clear the low 13 bits; a carry out of the mantissa bumps the exponent, and from
    the largest finite binade it lands exactly on inf, as RNE overflow should.  inf/NaN pass."""
    b = v32.view(np.uint32).astype(np.uint64)
    r = ((b + 0xFFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
    special = (b & 0x7F800000) == 0x7F800000
    r = np.where(special, b.astype(np.uint32), r)
    return r.view(np.float32)


@pytest.mark.parametrize("path", ["vector", "scalar", "dma"])
def test_tfloat32_rounding_against_bit_manipulation(path):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(7)
    v = np.concatenate([
        _f32_bits(rng.integers(0, 2 ** 32, 60000, dtype=np.uint64)),          # any pattern
        _f32_bits((rng.integers(0, 2 ** 19, 4096, dtype=np.uint64) << 13)
                  | 0x1000),                                                    # exact ties
        _f32_bits((rng.integers(0, 2 ** 19, 4096, dtype=np.uint64) << 13)
                  | 0x1001),                                                    # just above
        _f32_bits((rng.integers(0, 2 ** 19, 4096, dtype=np.uint64) << 13)
                  | 0x0FFF),                                                    # just below
        np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max, 0.0, -0.0, np.inf,
                  -np.inf, np.nan, 1.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11], np.float32),
    ]).astype(np.float32)
    tf32 = nl.tfloat32

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.load(x)
        if path == "vector":
            t = nisa.tensor_copy(s, dtype=tf32)
        elif path == "scalar":
            t = nisa.activation(op=nl.copy, data=s, dtype=tf32)
        else:
            t = nl.ndarray(x.shape, dtype=tf32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
        # back to an fp32 tile: tf32 -> fp32 is exact, so this only reveals the stored bits
        nl.store(out, value=nisa.tensor_copy(t, dtype=nl.float32))
        return out

    tiles, n = _as_tiles(v)
    got = np.concatenate([run(k, t).reshape(-1) for t in tiles])[:n]
    assert_exact(got, _hand_tf32(v), signed_zero=path != "scalar")


# --------------------------------------------------------------------------------------------
# float -> int

INTS = [np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)]


def _int_patterns(dt, rng):
    info = np.iinfo(dt)
    k = rng.integers(max(info.min, -2 ** 24), min(info.max, 2 ** 24), 2000).astype(np.float64)
    v = [k, k + 0.5, k - 0.5, k + 0.25, k + 0.75, k + 0.5 + 2 ** -10,
         np.array([info.min, info.max, info.min - 0.5, info.max + 0.5, info.min - 1.0,
                   info.max + 1.0, info.min - 1e6, info.max + 1e6, 1e30, -1e30, 0.0, -0.0,
                   0.5, -0.5, 1.5, -1.5, 2.5, -2.5, np.inf, -np.inf, np.nan, -np.nan,
                   2.0 ** 31, -2.0 ** 31, 2.0 ** 32, 2147483520.0, 4294967040.0]),
         rng.standard_normal(2000) * 2.0 ** rng.integers(-4, 40, 2000)]
    return np.concatenate(v).astype(np.float32)


@pytest.mark.parametrize("path", ["vector", "scalar", "gpsimd", "dma", "load"])
@pytest.mark.parametrize("dt", INTS, ids=str)
def test_float_to_int_rne_saturate_nan_zero(dt, path):
    rng = np.random.default_rng(3)
    v = _int_patterns(dt, rng)
    got = _write_through_kernel(v, dt, path)
    assert_exact(got, round_f2i(v.astype(np.float64), dt))


@pytest.mark.parametrize("src", [BF16, F16, E4M3, E5M2])
def test_low_precision_float_to_int(src):
    """Every value of a 16/8-bit float format into int16/uint8/int32."""
    bits = np.arange(2 ** (8 * src.itemsize)).astype({1: np.uint8, 2: np.uint16}[src.itemsize])
    x = bits.view(src)
    for dst in (np.dtype(np.int16), np.dtype(np.uint8), np.dtype(np.int32)):
        n = x.size
        F = 512
        rows = -(-n // F)
        xp = np.zeros(rows * F, src)
        xp[:n] = x
        got = np.concatenate([run(_copy_kernel(dst), xp.reshape(rows, F)[i:i + 128]).reshape(-1)
                              for i in range(0, rows, 128)])[:n]
        assert_exact(got, round_f2i(x.astype(np.float64), dst), what=f"{src}->{dst}")


# --------------------------------------------------------------------------------------------
# stochastic rounding

SR_TARGETS = [BF16, F16, E4M3, E5M2]


def _neighbours(v32: np.ndarray, dt):
    """(lo, hi): the largest value of dt <= v and the smallest >= v (float64), by search in the
    sorted list of every finite value of dt."""
    vals = _finite_target_values(dt)
    v = v32.astype(np.float64)
    i = np.searchsorted(vals, v, side="right")
    lo = vals[np.clip(i - 1, 0, vals.size - 1)]
    j = np.searchsorted(vals, v, side="left")
    hi = vals[np.clip(j, 0, vals.size - 1)]
    return lo, hi


def _sr_values(rng, dt, n):
    """fp32 values strictly inside the finite range of dt, mostly not representable in dt."""
    vals = _finite_target_values(dt)
    i = rng.integers(0, vals.size - 1, n)
    frac = rng.random(n)
    v = (vals[i] + frac * (vals[i + 1] - vals[i])).astype(np.float32)
    return v


@pytest.mark.parametrize("path", ["vector", "scalar", "dma"])
@pytest.mark.parametrize("dt", SR_TARGETS, ids=str)
def test_stochastic_rounding_returns_a_neighbour(dt, path):
    rng = np.random.default_rng(5)
    v = np.concatenate([_sr_values(rng, dt, 60000),
                        _finite_target_values(dt)[::7].astype(np.float32)])  # exact values
    got = _write_through_kernel(v, dt, path, stochastic_rounding=True, seed=1234)
    lo, hi = _neighbours(v, dt)
    g = got.astype(np.float64)
    assert np.all((g == lo) | (g == hi)), "result is not one of the two neighbours"
    exact = lo == hi
    assert np.array_equal(g[exact], v[exact].astype(np.float64))  # representable: unchanged
    if path != "dma":  # whether DMA casts round stochastically too is not documented
        # both neighbours do occur on engine writes (it is not round-to-nearest in disguise)
        ne = ~exact
        rne = v[ne].astype(dt).astype(np.float64)
        assert np.mean(g[ne] != rne) > 0.1


def test_stochastic_rounding_keeps_specials():
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.0], np.float32)
    got = _write_through_kernel(v, BF16, "vector", stochastic_rounding=True, seed=9)
    assert_exact(got, v.astype(BF16))


@pytest.mark.parametrize("dt", SR_TARGETS, ids=str)
def test_stochastic_rounding_is_unbiased(dt):
    """Each element rounds up with probability p = (v - lo) / (hi - lo) when unbiased.  Over N
    independent elements the centred count S = sum(up_i - p_i) has P(|S|/N >= t) <= 2 exp(-2 N t^2)
    (Hoeffding; each term lies in an interval of length 1).  With N = 128 * 2048 = 262144 and
    t = sqrt(ln(2 / 1e-9) / (2 N)) ~= 0.0064 a correct implementation fails with probability
    < 1e-9; rounding to nearest instead would give |S|/N ~ 0.25, always rounding down ~0.5.
    The same bound per partition (N = 2048, a different p per partition, family-wise
    1e-9 over 128 partitions: t ~= 0.072) catches a bias that depends on the value."""
    rng = np.random.default_rng(11)
    P, F = 128, 2048
    # one value per partition, repeated along the free dim
    col = _sr_values(rng, dt, P)
    lo, hi = _neighbours(col, dt)
    keep = hi > lo
    col = col[keep]
    lo, hi = lo[keep], hi[keep]
    p = (col.astype(np.float64) - lo) / (hi - lo)
    x = np.repeat(col[:, None], F, axis=1)
    k = _convert_kernel(dt, "vector")
    got = run(k, x, target="trn2", stochastic_rounding=True, seed=2024).astype(np.float64)
    up = (got == hi[:, None])
    assert np.all(up | (got == lo[:, None]))
    N = up.size
    t_all = math.sqrt(math.log(2 / 1e-9) / (2 * N))
    assert abs(up.mean() - p.mean()) <= t_all, (up.mean(), p.mean(), t_all)
    t_row = math.sqrt(math.log(2 * up.shape[0] / 1e-9) / (2 * F))
    dev = np.abs(up.mean(axis=1) - p)
    assert np.all(dev <= t_row), (dev.max(), t_row)
    # unbiased in value, too: the mean of the rounded values approaches v
    err = (got.mean(axis=1) - col.astype(np.float64)) / (hi - lo)
    assert np.all(np.abs(err) <= t_row)


@FEW
@given(seed=seeds, dt=st.sampled_from(SR_TARGETS), P=st.integers(1, 128),
       F=st.integers(1, 256))
def test_stochastic_rounding_reproducible_for_a_seed(seed, dt, P, F):
    rng = np.random.default_rng(seed)
    x = _sr_values(rng, dt, P * F).reshape(P, F)
    k = _convert_kernel(dt, "vector")
    a = run(k, x, stochastic_rounding=True, seed=seed % 1000)
    b = run(k, x, stochastic_rounding=True, seed=seed % 1000)
    assert_exact(a, b)
    if P * F >= 2000:
        c = run(k, x, stochastic_rounding=True, seed=seed % 1000 + 1)
        assert not np.array_equal(a.view(np.uint8), c.view(np.uint8))


def test_stochastic_rounding_off_is_rne():
    rng = np.random.default_rng(2)
    x = _sr_values(rng, BF16, 128 * 64).reshape(128, 64)
    got = run(_convert_kernel(BF16, "vector"), x, stochastic_rounding=False, seed=3)
    assert_exact(got, x.astype(BF16))


def test_stochastic_rounding_streams_differ_between_spmd_instances():
    """Program instances of one launch run one after another on the core: each continues the
    random stream instead of restarting it, so two instances rounding the same values must not
    produce identical patterns (that would correlate the rounding errors of a whole grid)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(8)
    x = _sr_values(rng, BF16, 128 * 256).reshape(128, 256)

    @nki.jit
    def k(xin):
        out = nl.ndarray((2, 128, 256), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i], value=nisa.tensor_copy(nl.load(xin), dtype=nl.bfloat16))
        return out

    got = run(k[2], x, stochastic_rounding=True, seed=77)
    lo, hi = _neighbours(x.reshape(-1), BF16)
    for g in got:
        gv = g.reshape(-1).astype(np.float64)
        assert np.all((gv == lo) | (gv == hi))
    assert not np.array_equal(got[0].view(np.uint16), got[1].view(np.uint16))
    again = run(k[2], x, stochastic_rounding=True, seed=77)
    assert_exact(again, got)  # still reproducible for the seed
