"""Per-instruction checks of the elementwise ALU family (legacy ``neuronxcc.nki`` API):
nisa.tensor_tensor, tensor_scalar, scalar_tensor_tensor, tensor_copy, memset, iota, affine_select,
reciprocal, and the nl.* arithmetic with broadcasting, dtype promotion and nl.where.

Hardware model used for the references (nki-api.md 3.8, hardware.md 2.3/10): arithmetic ALU ops
convert every input to fp32, compute one fp32 operation (IEEE, round to nearest even) and round the
result into the output dtype; bitvec ops act on the raw integer bits; 32-bit integer add/multiply
run exactly on GpSimd.  A single fp32 add/sub/mul/div/max/min followed by an RNE write is exactly
representable by "float64 op, round to fp32, round to the output dtype" (double rounding through
float64 is innocuous for + - * / since 53 >= 2*24 + 2), so those checks are bit-exact.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from test_ops_common import (BF16, E4M3, E5M2, F16, F32, FEW, FLOATS, SETTINGS, apply,
                             assert_close, assert_exact, f64, legacy, rand_float, rand_int,
                             ref_promote, round_f2i, run, seeds, tile_shapes, write)

I32, U8, I8, I16, U16, U32 = (np.dtype(t) for t in (np.int32, np.uint8, np.int8, np.int16,
                                                    np.uint16, np.uint32))
# --------------------------------------------------------------------------------------------
# reference binary ops on exact float64 inputs

def _cmp(f):
    return lambda a, b: f(a, b).astype(np.float64)


REF = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
    "equal": _cmp(np.equal), "not_equal": _cmp(np.not_equal), "less": _cmp(np.less),
    "less_equal": _cmp(np.less_equal), "greater": _cmp(np.greater),
    "greater_equal": _cmp(np.greater_equal),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float64),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float64),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float64),
}
EXACT_OPS = sorted(REF)
# NaN/inf inputs are IEEE-defined for these; max/min of NaN is not documented for the engines
SPECIAL_OK = {"add", "subtract", "multiply", "divide", "equal", "not_equal", "less", "less_equal",
              "greater", "greater_equal"}


def ref_binary(name, a, b):
    with np.errstate(all="ignore"):
        return REF[name](f64(a), f64(b))


def nl_op(nl, name):
    return getattr(nl, name)


@SETTINGS
@given(shape=tile_shapes(), da=st.sampled_from(FLOATS), db=st.sampled_from(FLOATS),
       name=st.sampled_from(EXACT_OPS), seed=seeds, special=st.booleans(),
       out=st.sampled_from([None, F32, BF16, F16, E4M3, E5M2, I32]))
def test_tensor_tensor_arithmetic_bit_exact(shape, da, db, name, seed, special, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    sp = 0.1 if special and name in SPECIAL_OK else 0.0
    a = rand_float(rng, shape, da, special=sp)
    b = rand_float(rng, shape, db, special=sp)
    if name in ("equal", "not_equal", "less_equal", "greater_equal") and rng.random() < 0.5:
        b = a.astype(np.float64).astype(db)  # make ties likely
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl_op(nl, name), dtype=out), a, b)
    od = ref_promote(da, db) if out is None else out
    if od == I32 and name not in ("divide",):
        pass
    ref = write(ref_binary(name, a, b), od)
    assert got.dtype == od
    assert_exact(got, ref, signed_zero=name not in ("maximum", "minimum"), what=name)


@FEW
@given(shape=tile_shapes(max_free=256), seed=seeds)
def test_tensor_tensor_numpy_tokens_and_engine_choice(shape, seed):
    """Legacy kernels pass numpy ufuncs as op tokens; GpSimd computes the same values."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, shape, F32)
    b = rand_float(rng, shape, BF16)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=np.multiply,
                                                engine=nisa.gpsimd_engine), a, b)
    assert_exact(got, write(f64(a) * f64(b), F32))
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=np.subtract), a, b)
    assert_exact(got, write(f64(a) - f64(b), F32))


@FEW
@given(shape=tile_shapes(max_free=256), seed=seeds, dt=st.sampled_from([F32, BF16, F16]))
def test_tensor_tensor_power(shape, seed, dt):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, shape, dt, positive=True, scale_exp=(-2, 2))
    b = rand_float(rng, shape, dt, lo=-3.0, hi=3.0)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl.power), a, b)
    ref = np.power(f64(a), f64(b))
    # pow is a transcendental (exp/log pair) in fp32: allow 4 fp32 ulps before the write, then
    # the output rounding (one ulp of dt when the fp32 value lands on the other side of a tie).
    assert_close(got, ref, dt=dt, ulps=1.0, rtol=4 * 2.0 ** -24, what="power")


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([I32, U32, U8, I8, I16, U16]),
       name=st.sampled_from(["bitwise_and", "bitwise_or", "bitwise_xor"]), seed=seeds)
def test_tensor_tensor_bitwise_on_integer_bits(shape, dt, name, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a, b = rand_int(rng, shape, dt), rand_int(rng, shape, dt)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl_op(nl, name)), a, b)
    ref = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
           "bitwise_xor": np.bitwise_xor}[name](a, b)
    assert_exact(got, ref.astype(dt), what=name)


def _shift_ref(a, s, left):
    """32-bit shifts on the bit pattern: left shift drops bits shifted out; right_shift is the
    ALU's *logical* shift right (nki.api.shared.rst: 'Logical Shift Right: nl.right_shift';
    arithmetic shift right is not supported)."""
    u = a.view(np.uint32).astype(np.uint64)
    s = s.astype(np.uint64)
    r = ((u << s) & 0xFFFFFFFF) if left else (u >> s)
    return r.astype(np.uint32).view(a.dtype)


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([I32, U32]), left=st.booleans(),
       seed=seeds)
def test_tensor_tensor_shifts_32bit(shape, dt, left, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_int(rng, shape, dt)
    s = rand_int(rng, shape, dt, lo=0, hi=31)
    op = nl.left_shift if left else nl.right_shift
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=op), a, s)
    assert_exact(got, _shift_ref(a, s, left))


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([I32, I16, U16, U8]),
       name=st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]), seed=seeds)
def test_tensor_tensor_integer_arithmetic_exact(shape, dt, name, seed):
    """32-bit integer add/multiply run exactly on GpSimd (legacy ALU table note); values are kept
    small enough that no result overflows the dtype (overflow behaviour is not documented)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    if name == "multiply":
        lim = int(np.sqrt(min(info.max, 2 ** 30)))
    else:
        lim = min(info.max // 2, 2 ** 30)
    lo = 0 if info.min == 0 else -lim
    a = rand_int(rng, shape, dt, lo=lo, hi=lim)
    b = rand_int(rng, shape, dt, lo=lo, hi=lim)
    if name == "subtract" and info.min == 0:
        a, b = np.maximum(a, b), np.minimum(a, b)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl_op(nl, name)), a, b)
    ref = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "maximum": np.maximum, "minimum": np.minimum}[name](a.astype(np.int64),
                                                               b.astype(np.int64))
    assert_exact(got, ref.astype(dt), what=name)


def test_tensor_tensor_large_int32_add_is_exact_not_fp32():
    nki, nl, nisa = legacy()
    a = np.full((4, 8), 2 ** 24 + 1, np.int32)
    b = np.full((4, 8), 2, np.int32)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl.add), a, b)
    assert_exact(got, np.full((4, 8), 2 ** 24 + 3, np.int32))


def test_tensor_tensor_rejects_mismatched_partitions_and_two_psum():
    from trnsim.errors import ShapeError, TrnsimError
    nki, nl, nisa = legacy()
    a = np.ones((64, 8), np.float32)
    b = np.ones((32, 8), np.float32)
    with pytest.raises(ShapeError):
        apply(lambda x, y: nisa.tensor_tensor(x, y, op=nl.add), a, b)

    @nki.jit
    def k(x):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        p1 = nisa.nc_matmul(t, t)
        p2 = nisa.nc_matmul(t, t)
        nl.store(out, value=nisa.tensor_tensor(p1, p2, op=nl.add))
        return out

    with pytest.raises(TrnsimError):
        run(k, np.ones((8, 8), np.float32))


# --------------------------------------------------------------------------------------------
# tensor_scalar

ARITH = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]


def _ref_op(name, a, b):
    with np.errstate(all="ignore"):
        return {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum}[name](a, b)


def _r32(v):
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)


@SETTINGS
@given(shape=tile_shapes(), dt=st.sampled_from(FLOATS), seed=seeds,
       op0=st.sampled_from(ARITH), op1=st.sampled_from([None] + ARITH),
       rev0=st.booleans(), rev1=st.booleans(), col0=st.booleans(), col1=st.booleans(),
       out=st.sampled_from([None, F32, BF16, F16, E4M3]),
       engine=st.sampled_from(["vector", "scalar", "gpsimd"]))
def test_tensor_scalar_one_and_two_ops(shape, dt, seed, op0, op1, rev0, rev1, col0, col1, out,
                                       engine):
    """(data op0 operand0) op1 operand1 with scalar or (P, 1) operands and reverse flags; the
    intermediate stays fp32 (rounded once per op), the result is rounded into the output dtype."""
    nki, nl, nisa = legacy()
    # engines support subsets of the ALU (ISA docs): the trn2 Scalar engine only multiply[, add]
    # or add; GpSimd add / multiply (legacy ALU table)
    if engine == "scalar":
        op0, op1 = [("multiply", "add"), ("multiply", None), ("add", None)][
            ARITH.index(op0) % 3]
    elif engine == "gpsimd":
        op0 = op0 if op0 in ("add", "multiply") else "multiply"
        op1 = op1 if op1 in ("add", "multiply", None) else "add"
    eng = {"vector": nisa.vector_engine, "scalar": nisa.scalar_engine,
           "gpsimd": nisa.gpsimd_engine}[engine]
    rng = np.random.default_rng(seed)
    P = shape[0]
    x = rand_float(rng, shape, dt)
    s0 = np.float32(rng.standard_normal() * 4)
    s1 = np.float32(rng.standard_normal() * 4)
    c0 = rand_float(rng, (P, 1), F32)  # vector operands are fp32 (ISA docs)
    c1 = rand_float(rng, (P, 1), F32)
    bshape = (P,) + (1,) * (len(shape) - 1)

    def body(t, k0, k1):
        o0 = k0 if col0 else float(s0)
        o1 = k1 if col1 else float(s1)
        if op1 is None:
            return nisa.tensor_scalar(t, op0=nl_op(nl, op0), operand0=o0, reverse0=rev0,
                                      dtype=out, engine=eng)
        return nisa.tensor_scalar(t, op0=nl_op(nl, op0), operand0=o0, reverse0=rev0,
                                  op1=nl_op(nl, op1), operand1=o1, reverse1=rev1, dtype=out,
                                  engine=eng)

    got = apply(body, x, c0, c1)
    v0 = f64(c0).reshape(bshape) if col0 else np.float64(s0)
    v1 = f64(c1).reshape(bshape) if col1 else np.float64(s1)
    xv = f64(x)
    r = _r32(_ref_op(op0, v0, xv) if rev0 else _ref_op(op0, xv, v0))
    if op1 is not None:
        r = _r32(_ref_op(op1, v1, r) if rev1 else _ref_op(op1, r, v1))
    od = dt if out is None else out
    ref = write(np.broadcast_to(r, shape), od)
    assert got.dtype == od
    assert_exact(got, ref, signed_zero=not ({op0, op1} & {"maximum", "minimum"}))


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([I32, U32]), seed=seeds,
       op0=st.sampled_from(["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                            "right_shift"]),
       op1=st.sampled_from([None, "bitwise_and", "bitwise_xor", "left_shift", "right_shift"]))
def test_tensor_scalar_bitvec_on_int32(shape, dt, seed, op0, op1):
    """Bitvec tensor_scalar with integer immediates acts on the 32-bit patterns (wrapping)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_int(rng, shape, dt)

    def imm(name):
        return int(rng.integers(0, 32)) if "shift" in name else int(rng.integers(0, 2 ** 31 - 1))

    i0 = imm(op0)
    i1 = imm(op1) if op1 else None

    def body(t):
        if op1 is None:
            return nisa.tensor_scalar(t, op0=nl_op(nl, op0), operand0=i0)
        return nisa.tensor_scalar(t, op0=nl_op(nl, op0), operand0=i0, op1=nl_op(nl, op1),
                                  operand1=i1)

    got = apply(body, x)

    def ref1(name, v, k):
        if name == "left_shift":
            return _shift_ref(v, np.full(v.shape, k, v.dtype), True)
        if name == "right_shift":
            return _shift_ref(v, np.full(v.shape, k, v.dtype), False)
        u = v.view(np.uint32)
        f = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
             "bitwise_xor": np.bitwise_xor}[name]
        return f(u, np.uint32(k)).view(v.dtype)

    ref = ref1(op0, x, i0)
    if op1:
        ref = ref1(op1, ref, i1)
    assert_exact(got, ref)


def test_tensor_scalar_rejects_mixed_bitvec_and_arithmetic():
    from trnsim.errors import KernelError
    nki, nl, nisa = legacy()
    with pytest.raises(KernelError):
        apply(lambda t: nisa.tensor_scalar(t, op0=nl.add, operand0=1, op1=nl.bitwise_and,
                                           operand1=3), np.ones((4, 4), np.int32))


@pytest.mark.parametrize("target,op0,op1,ok", [
    ("trn2", "multiply", "add", True), ("trn2", "multiply", None, True),
    ("trn2", "add", None, True),
    ("trn2", "subtract", None, False), ("trn2", "add", "multiply", False),
    ("trn2", "maximum", None, False), ("trn1", "multiply", None, False),
    ("trn3", "subtract", "maximum", True)])
def test_tensor_scalar_scalar_engine_operator_rules(target, op0, op1, ok):
    """ISA docs: the trn2 Scalar engine runs only multiply[, add] or add; Scalar-engine
    add/multiply exist from NeuronCore-v3 (legacy ALU table note)."""
    from trnsim.errors import KernelError
    nki, nl, nisa = legacy()
    x = np.full((4, 4), 3.0, np.float32)

    def body(t):
        kw = {} if op1 is None else dict(op1=getattr(nl, op1), operand1=2.0)
        return nisa.tensor_scalar(t, op0=getattr(nl, op0), operand0=5.0,
                                  engine=nisa.scalar_engine, **kw)

    if ok:
        apply(body, x, target=target)
    else:
        with pytest.raises(KernelError):
            apply(body, x, target=target)


def test_tensor_scalar_bitvec_runs_on_vector_only():
    from trnsim.errors import KernelError
    nki, nl, nisa = legacy()
    with pytest.raises(KernelError):
        apply(lambda t: nisa.tensor_scalar(t, op0=nl.bitwise_and, operand0=3,
                                           engine=nisa.gpsimd_engine), np.ones((4, 4), np.int32))


# --------------------------------------------------------------------------------------------
# scalar_tensor_tensor

@SETTINGS
@given(shape=tile_shapes(), d0=st.sampled_from(FLOATS), d1=st.sampled_from(FLOATS), seed=seeds,
       op0=st.sampled_from(ARITH), op1=st.sampled_from(ARITH), rev0=st.booleans(),
       rev1=st.booleans(), col=st.booleans(), out=st.sampled_from([None, F32, BF16]))
def test_scalar_tensor_tensor(shape, d0, d1, seed, op0, op1, rev0, rev1, col, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    P = shape[0]
    x = rand_float(rng, shape, d0)
    y = rand_float(rng, shape, d1)
    c = rand_float(rng, (P, 1), F32)
    s = np.float32(rng.standard_normal() * 3)

    def body(t, u, k):
        return nisa.scalar_tensor_tensor(data=t, op0=nl_op(nl, op0),
                                         operand0=k if col else float(s), op1=nl_op(nl, op1),
                                         operand1=u, reverse0=rev0, reverse1=rev1, dtype=out)

    got = apply(body, x, y, c)
    v0 = f64(c).reshape((P,) + (1,) * (len(shape) - 1)) if col else np.float64(s)
    r = _r32(_ref_op(op0, v0, f64(x)) if rev0 else _ref_op(op0, f64(x), v0))
    r = _r32(_ref_op(op1, f64(y), r) if rev1 else _ref_op(op1, r, f64(y)))
    od = ref_promote(d0, d1) if out is None else out
    assert got.dtype == od
    assert_exact(got, write(r, od), signed_zero=not ({op0, op1} & {"maximum", "minimum"}))


# --------------------------------------------------------------------------------------------
# tensor_copy, memset

@SETTINGS
@given(shape=tile_shapes(), src=st.sampled_from(FLOATS + (I32, U8, I8, I16)),
       dst=st.sampled_from(FLOATS + (I32, U8, I8, I16, U16, U32)), seed=seeds,
       engine=st.sampled_from(["vector", "scalar", "gpsimd"]), special=st.booleans())
def test_tensor_copy_dtype_conversion(shape, src, dst, seed, engine, special):
    """Same dtype: bit copy.  Else through fp32: RNE into floats; RNE + saturation (NaN -> 0)
    into integers (numerics.toml); integers reach floats through fp32 (so int32 -> bf16 rounds
    twice, as the engine does)."""
    nki, nl, nisa = legacy()
    eng = {"vector": nisa.vector_engine, "scalar": nisa.scalar_engine,
           "gpsimd": nisa.gpsimd_engine}[engine]
    rng = np.random.default_rng(seed)
    if src.kind in "iu":
        lim = 2 ** 24  # int -> int goes through fp32: keep values where fp32 is exact
        info = np.iinfo(src)
        x = rand_int(rng, shape, src, lo=max(info.min, -lim), hi=min(info.max, lim))
    else:
        x = rand_float(rng, shape, src, special=0.1 if special else 0.0, scale_exp=(-4, 12))
    got = apply(lambda t: nisa.tensor_copy(t, dtype=dst, engine=eng), x)
    if src == dst:
        ref = x.copy()
    else:
        ref = write(f64(x), dst)
    assert got.dtype == dst
    assert_exact(got, ref)


@SETTINGS
@given(shape=tile_shapes(max_dims=2), dt=st.sampled_from(FLOATS + (I32, U8, I16)),
       value=st.one_of(st.floats(-1e6, 1e6, allow_nan=False, width=32),
                       st.integers(-2 ** 31, 2 ** 31 - 1), st.sampled_from([0.5, 1.5, 2.5, -2.5,
                                                                          3.14159, 1e-3])),
       engine=st.sampled_from(["vector", "gpsimd"]))
def test_memset(shape, dt, value, engine):
    nki, nl, nisa = legacy()
    eng = {"vector": nisa.vector_engine, "gpsimd": nisa.gpsimd_engine}[engine]
    if isinstance(value, int) and dt.kind not in "iu":
        value = float(value)
    x = np.zeros(shape, np.float32)
    got = apply(lambda t: nisa.memset(shape=t.shape, value=value, dtype=dt, engine=eng), x)
    if isinstance(value, int) and dt.kind in "iu":
        info = np.iinfo(dt)
        ref = np.full(shape, min(max(value, info.min), info.max), dt)  # integer immediate
    else:
        ref = write(np.full(shape, value, np.float64), dt)
    assert_exact(got, ref)


# --------------------------------------------------------------------------------------------
# iota, affine_select, reciprocal

@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 300), a=st.integers(-8, 8), b=st.integers(-8, 8),
       c=st.integers(-1000, 1000), dt=st.sampled_from([I32, F32, BF16, F16, U8]))
def test_iota_affine_expression(P, F, a, b, c, dt):
    nki, nl, nisa = legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray((P, F), dtype=dt, buffer=nl.shared_hbm)
        i_p = nl.arange(P)[:, None]
        i_f = nl.arange(F)[None, :]
        nl.store(out, value=nisa.iota(a * i_p + b * i_f + c, dtype=dt))
        return out

    got = run(k, np.zeros((1, 1), np.float32))
    v = a * np.arange(P)[:, None] + b * np.arange(F)[None, :] + c
    ref = round_f2i(v, dt) if dt.kind in "iu" else write(v.astype(np.float64), dt)
    assert_exact(got, ref)


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 256), a=st.integers(-3, 3), b=st.integers(-3, 3),
       c=st.integers(-100, 100), cmp=st.sampled_from(["ge", "gt", "le", "lt", "eq"]),
       dt=st.sampled_from([F32, BF16, F16, E4M3]), seed=seeds,
       fill=st.sampled_from([-np.inf, -9984.0, 0.0, 1.5, -30000.0]))
def test_affine_select(P, F, a, b, c, cmp, dt, seed, fill):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), dt)

    @nki.jit
    def k(t_in):
        out = nl.ndarray((P, F), dtype=dt, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:P, 0:F]
        e = a * i_p + b * i_f
        pred = {"ge": e >= c, "gt": e > c, "le": e <= c, "lt": e < c, "eq": e == c}[cmp]
        t = nl.load(t_in)
        nl.store(out, value=nisa.affine_select(pred, t, fill))
        return out

    got = run(k, x)
    e = a * np.arange(P)[:, None] + b * np.arange(F)[None, :]
    pred = {"ge": e >= c, "gt": e > c, "le": e <= c, "lt": e < c, "eq": e == c}[cmp]
    ref = np.where(pred, x, write(np.full((P, F), fill), dt))
    assert_exact(got, ref.astype(dt))


@SETTINGS
@given(shape=tile_shapes(), dt=st.sampled_from(FLOATS), seed=seeds,
       out=st.sampled_from([None, F32, BF16]))
def test_reciprocal_vector(shape, dt, seed, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, shape, dt, special=0.05)
    got = apply(lambda t: nisa.reciprocal(t, dtype=out), x)
    od = dt if out is None else out
    with np.errstate(divide="ignore"):
        ref = 1.0 / f64(x)
    assert got.dtype == od
    # Vector reciprocal is the "more precise" one [SHARED] but not documented as correctly
    # rounded: allow one fp32 ulp before the write plus one ulp of the output dtype.
    assert_close(got, write(ref, od), dt=od, ulps=1.0, rtol=2.0 ** -23, what="reciprocal")


# --------------------------------------------------------------------------------------------
# nl.* arithmetic: broadcasting (incl. across partitions), promotion, weak scalars, nl.where

NL_OPS = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "less", "greater_equal"]


@st.composite
def broadcast_pair(draw):
    P = draw(st.integers(1, 128))
    F = draw(st.integers(1, 128))
    full = (P, F)
    kinds = {"full": full, "col": (P, 1), "row": (1, F), "one": (1, 1)}
    ka = draw(st.sampled_from(["full", "col", "row"]))
    kb = draw(st.sampled_from(["full", "col", "row", "one"] if ka == "full" else ["full"]))
    if draw(st.booleans()):
        ka, kb = kb, ka
    return kinds[ka], kinds[kb]


@SETTINGS
@given(shapes=broadcast_pair(), da=st.sampled_from(FLOATS + (I32, U8, I8, I16)),
       db=st.sampled_from(FLOATS + (I32, U8, I8, I16)), name=st.sampled_from(NL_OPS),
       seed=seeds, out=st.sampled_from([None, None, F32, BF16, I32]))
def test_nl_binary_broadcast_and_promotion(shapes, da, db, name, seed, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    sa, sb = shapes

    def mk(shape, d):
        if d.kind in "iu":
            info = np.iinfo(d)
            return rand_int(rng, shape, d, lo=max(info.min, -1000), hi=min(info.max, 1000))
        return rand_float(rng, shape, d)

    a, b = mk(sa, da), mk(sb, db)
    if out is None:
        got = apply(lambda x, y: nl_op(nl, name)(x, y), a, b)
    else:
        got = apply(lambda x, y: nl_op(nl, name)(x, y, dtype=out), a, b)
    od = ref_promote(da, db)
    if name in ("equal", "less", "greater_equal"):
        od = np.dtype(np.bool_)  # legacy nl comparisons default to dtype=bool (signature)
    if out is not None:
        od = out  # an explicit dtype= always wins
    ref = write(ref_binary(name, a, b), od)
    assert got.dtype == od, (da, db, name)
    # integer-only operands: exact integer math on GpSimd has no -0 (-5 * 0 is +0)
    ints = da.kind in "iu" and db.kind in "iu"
    assert_exact(got, ref, signed_zero=name not in ("maximum", "minimum") and not ints)


@SETTINGS
@given(shape=tile_shapes(max_dims=2), dt=st.sampled_from(FLOATS + (I32, I8, U8)),
       scalar=st.sampled_from([2, -3, 1.2, 0.5, True, "f16", "i8", "bf16"]), rev=st.booleans(),
       name=st.sampled_from(["add", "multiply", "subtract", "maximum"]), seed=seeds)
def test_nl_scalar_weak_typing(shape, dt, scalar, rev, name, seed):
    """Weak Python scalars count as int32 / float32 / uint8(bool); explicitly typed numpy scalars
    keep their dtype (docs: (np.int8, 2) -> int32, (np.float16, 1.2) -> float32,
    (float16 tile, np.float16(2)) -> float16)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    s = {"f16": np.float16(2.5), "i8": np.int8(3), "bf16": ml_dtypes.bfloat16(0.75)}.get(scalar,
                                                                                       scalar)
    if dt.kind in "iu":
        x = rand_int(rng, shape, dt, lo=0 if dt.kind == "u" else -50, hi=50)
    else:
        x = rand_float(rng, shape, dt)
    f = nl_op(nl, name)
    got = apply(lambda t: f(s, t) if rev else f(t, s), x)
    if isinstance(s, bool):
        sd = U8
    elif isinstance(s, int):
        sd = I32
    elif isinstance(s, float):
        sd = F32
    else:
        sd = np.dtype(type(s)) if not isinstance(s, ml_dtypes.bfloat16) else BF16
    od = ref_promote(dt, sd)
    sv = np.float64(np.float32(s)) if not isinstance(s, (int, np.integer)) else np.float64(s)
    with np.errstate(all="ignore"):
        r = REF[name](sv, f64(x)) if rev else REF[name](f64(x), sv)
    assert got.dtype == od, (dt, type(s), od)
    assert_exact(got, write(r, od), signed_zero=name != "maximum")


@SETTINGS
@given(shape=tile_shapes(max_dims=2), dx=st.sampled_from(FLOATS), dy=st.sampled_from(FLOATS),
       y_scalar=st.booleans(), seed=seeds)
def test_nl_where(shape, dx, dy, y_scalar, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    c = (rng.random(shape) < 0.5).astype(np.uint8)
    x = rand_float(rng, shape, dx, special=0.05)
    y = rand_float(rng, shape, dy, special=0.05)
    if y_scalar:
        got = apply(lambda cc, xx: nl.where(cc, xx, -7.25), c, x)
        ref = np.where(c != 0, x, np.asarray(-7.25).astype(dx))
        assert_exact(got, ref.astype(dx))
    else:
        got = apply(lambda cc, xx, yy: nl.where(cc, xx, yy), c, x, y)
        od = ref_promote(dx, dy)
        ref = np.where(c != 0, write(f64(x), od), write(f64(y), od))
        assert got.dtype == od
        assert_exact(got, ref)


@FEW
@given(shape=tile_shapes(max_dims=2), seed=seeds)
def test_tile_operators_match_nl_functions(shape, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, shape, F32)
    b = rand_float(rng, shape, F32)
    got = apply(lambda x, y: (x + y) * y - x / 2.0, a, b)
    r = _r32(_r32(_r32(f64(a) + f64(b)) * f64(b)) - _r32(f64(a) / 2.0))
    assert_exact(got, write(r, F32))
    ia = rand_int(rng, shape, I32, lo=0, hi=1 << 20)
    ib = rand_int(rng, shape, I32, lo=0, hi=1 << 20)
    got = apply(lambda x, y: (x & y) | (x ^ 5), ia, ib)
    assert_exact(got, (ia & ib) | (ia ^ 5))


# --------------------------------------------------------------------------------------------
# operands that are strided views, results written into slices, masked compute

@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(2, 200), data=st.data(), seed=seeds,
       dt=st.sampled_from([F32, BF16]))
def test_strided_operand_views_and_sliced_destination(P, F, data, seed, dt):
    nki, nl, nisa = legacy()
    step = data.draw(st.integers(1, 3), label="step")
    n = data.draw(st.integers(1, max(1, (F - 1) // step + 1)), label="n")
    s0 = data.draw(st.integers(0, F - 1 - (n - 1) * step), label="start")
    d0 = data.draw(st.integers(0, F - n), label="dst offset")
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), dt)
    y = rand_float(rng, (P, F), dt)

    @nki.jit
    def k(xin, yin):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(xin)
        b = nl.load(yin)
        d = nl.zeros((P, F), dtype=nl.float32, buffer=nl.sbuf)
        sl = slice(s0, s0 + (n - 1) * step + 1, step)
        d[:, d0:d0 + n] = nisa.tensor_tensor(a[:, sl], b[:, F - n:], op=nl.subtract,
                                             dtype=nl.float32)
        nl.store(out, value=d)
        return out

    got = run(k, x, y)
    ref = np.zeros((P, F))
    ref[:, d0:d0 + n] = f64(x)[:, s0:s0 + (n - 1) * step + 1:step] - f64(y)[:, F - n:]
    assert_exact(got, write(ref, F32))


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 200), seed=seeds, pl=st.integers(0, 128),
       fl=st.integers(0, 200), op=st.sampled_from(["multiply", "exp", "tensor_tensor"]))
def test_masked_compute_keeps_unselected_destination_elements(P, F, seed, pl, fl, op):
    """mask= skips the masked-off elements: assigned into an existing tile they keep its old
    values."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), F32, lo=-4, hi=4)

    @nki.jit
    def k(xin):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(xin)
        d = nl.full((P, F), -1.0, dtype=nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:P, 0:F]
        m = (i_p < pl) & (i_f >= fl)
        if op == "multiply":
            d[i_p, i_f] = nl.multiply(a[i_p, i_f], 3.0, mask=m)
        elif op == "exp":
            d[i_p, i_f] = nisa.activation(op=nl.exp, data=a[i_p, i_f], mask=m)
        else:
            d[i_p, i_f] = nisa.tensor_tensor(a[i_p, i_f], a[i_p, i_f], op=nl.add, mask=m)
        nl.store(out, value=d)
        return out

    got = run(k, x)
    ip, jf = np.mgrid[0:P, 0:F]
    m = (ip < pl) & (jf >= fl)
    v = f64(x)
    val = {"multiply": v * 3.0, "exp": np.exp(v), "tensor_tensor": v + v}[op]
    if op == "exp":
        ref = np.where(m, val, -1.0)
        assert_close(got, ref, dt=F32, ulps=4.0)
    else:
        assert_exact(got, write(np.where(m, val, -1.0), F32))


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([F32, BF16, F16, I32]), seed=seeds,
       name=st.sampled_from(["mod", "fmod"]), scalar=st.booleans())
def test_nl_mod_and_fmod(shape, dt, seed, name, scalar):
    """nl.mod: remainder with the divisor's sign (Python %, numpy.mod); nl.fmod: with the
    dividend's sign (C fmod, numpy.fmod) - legacy nl docs."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    if dt == I32:
        a = rand_int(rng, shape, dt, lo=-10 ** 6, hi=10 ** 6)
        b = rand_int(rng, shape, dt, lo=1, hi=1000) * rng.choice([-1, 1], shape).astype(np.int32)
    else:
        a = rand_float(rng, shape, dt, scale_exp=(-2, 6))
        b = rand_float(rng, shape, dt, scale_exp=(-2, 3), positive=True)
        b = (f64(b) * rng.choice([-1, 1], shape)).astype(dt)
    s = -7 if dt == I32 else 2.5
    f = getattr(nl, name)
    if scalar:
        got = apply(lambda x: f(x, s), a)
        bv = np.float64(s)
    else:
        got = apply(lambda x, y: f(x, y), a, b)
        bv = f64(b)
    ref = (np.mod if name == "mod" else np.fmod)(f64(a), bv)
    od = dt if not (scalar and dt != I32) else ref_promote(dt, F32)
    assert got.dtype == od
    assert_exact(got, write(ref, od))


def test_promotion_table_of_the_docs_for_every_pair():
    """nl.add result dtypes for every pair of NKI dtypes covered by the documented rules,
    including the documented examples with tfloat32 / uint16 / uint32."""
    nki, nl, nisa = legacy()
    U16, U32 = np.dtype(np.uint16), np.dtype(np.uint32)
    types = [F32, BF16, F16, E4M3, E5M2, I8, U8, I16, U16, I32, U32]
    seen = {}

    @nki.jit
    def k(x):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = {d: nisa.memset(shape=(1, 1), value=0, dtype=d) for d in types + [nl.tfloat32]}
        for a in types:
            for b in types:
                seen[(a, b)] = nl.add(tiles[a], tiles[b]).dtype
        tf = tiles[nl.tfloat32]
        seen["f32+tf32"] = nl.add(tiles[F32], tf).dtype
        seen["u16+tf32"] = nl.add(tiles[U16], tf).dtype
        seen["tf32+i32"] = nl.add(tf, tiles[I32]).dtype
        nl.store(out, value=nl.load(x))
        return out

    run(k, np.zeros((1, 1), np.float32))
    for a in types:
        for b in types:
            assert seen[(a, b)] == ref_promote(a, b), (a, b, seen[(a, b)])
    assert seen["f32+tf32"] == F32
    assert seen["u16+tf32"] == nl.tfloat32
    assert seen["tf32+i32"] == nl.tfloat32
