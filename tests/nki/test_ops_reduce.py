"""Per-instruction checks of the reduction family (legacy API): nisa.tensor_reduce (every reduce
op, negate, keepdims, multi-axis), tensor_partition_reduce, tensor_scalar_reduce,
tensor_tensor_scan, max8, bn_stats + bn_aggr, nl.sum/max/min/prod/mean/all/any, nl.softmax and
nl.loop_reduce.

Exactness: max/min/bitwise/logical reductions select or combine bits and are bit-exact; a scan
is a fixed sequence of fp32 operations and is bit-exact.  Sums and products are fp32 chains whose
order inside the engine is not documented, so they are checked against the float64 value with
the standard bound for n-term fp32 summation, (n - 1) * 2^-24 * sum|x_i| (plus one rounding of
the output dtype); products with n * 2^-24 relative.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from test_ops_common import (BF16, F16, F32, FEW, FLOATS, SETTINGS, apply, assert_close,
                             assert_exact, f64, legacy, rand_float, rand_int, ref_promote, run,
                             seeds, sum_bound, tile_shapes, ulp, write)

I32, U8, U16, U32, I16 = (np.dtype(t) for t in (np.int32, np.uint8, np.uint16, np.uint32,
                                               np.int16))


def _r32(v):
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)


def _check_sum(got, ref, abs_sum, n, od, what=""):
    """fp32 summation bound, then the rounding into the output dtype (a sum beyond the output
    dtype's range must come out as inf, as an RNE write of it does)."""
    got = np.asarray(got).astype(np.float64)
    ref_w = f64(write(ref, od))
    over = ~np.isfinite(ref_w)
    assert np.array_equal(got[over], ref_w[over]), f"{what}: overflow mismatch"
    tol = sum_bound(abs_sum, n, extra=1)
    if od != F32:
        tol = tol + ulp(ref, od)
    err = np.where(over, 0.0, np.abs(got - ref))
    assert np.all(err <= tol), f"{what}: max excess {np.max(err - tol)}"


@st.composite
def shape_and_axes(draw, max_free=512):
    shape = draw(tile_shapes(max_free=max_free))
    nd = len(shape)
    k = draw(st.integers(1, nd - 1))
    axes = tuple(range(nd - k, nd))
    style = draw(st.sampled_from(["tuple", "list", "neg", "int"]))
    if style == "list":
        spec = list(axes)
    elif style == "neg":
        spec = tuple(a - nd for a in axes)
    elif style == "int" and k == 1:
        spec = axes[0]
    else:
        spec = axes
    return shape, axes, spec


ARITH_RED = ["add", "maximum", "minimum", "multiply"]


@SETTINGS
@given(sa=shape_and_axes(), dt=st.sampled_from(FLOATS), op=st.sampled_from(ARITH_RED),
       negate=st.booleans(), keepdims=st.booleans(), seed=seeds,
       out=st.sampled_from([None, F32, BF16]), token=st.sampled_from(["nl", "np"]))
def test_tensor_reduce_arithmetic(sa, dt, op, negate, keepdims, seed, out, token):
    nki, nl, nisa = legacy()
    shape, axes, spec = sa
    rng = np.random.default_rng(seed)
    if op == "multiply":
        x = rand_float(rng, shape, dt, positive=True, scale_exp=(0, 0), lo=0.5, hi=2.0)
        x = (f64(x) * np.where(rng.random(shape) < 0.5, -1, 1)).astype(dt)
    else:
        x = rand_float(rng, shape, dt)
    tok = {"nl": {"add": nl.add, "maximum": nl.maximum, "minimum": nl.minimum,
                  "multiply": nl.multiply},
           "np": {"add": np.add, "maximum": np.max, "minimum": np.min,
                  "multiply": np.multiply}}[token][op]
    got = apply(lambda t: nisa.tensor_reduce(tok, t, axis=spec, negate=negate,
                                             keepdims=keepdims, dtype=out), x)
    od = dt if out is None else out
    v = f64(x)
    ref = {"add": np.sum, "maximum": np.max, "minimum": np.min,
           "multiply": np.prod}[op](v, axis=axes, keepdims=keepdims)
    if not keepdims and ref.ndim < 2:
        ref = ref.reshape(ref.shape + (1,) * (2 - ref.ndim))
    if negate:
        ref = -ref
    assert got.dtype == od and got.shape == ref.shape, (got.shape, ref.shape)
    n = int(np.prod([shape[a] for a in axes]))
    if op in ("maximum", "minimum"):
        assert_exact(got, write(ref, od), signed_zero=False)
    elif op == "add":
        _check_sum(got, ref, np.sum(np.abs(v), axis=axes).reshape(ref.shape), n, od)
    else:
        assert_close(got, write(ref, od), dt=od, ulps=1.0, rtol=(n + 1) * 2.0 ** -24)


@SETTINGS
@given(sa=shape_and_axes(max_free=256), dt=st.sampled_from([I32, U8, U16, U32, I16]),
       op=st.sampled_from(["bitwise_or", "bitwise_and", "bitwise_xor"]), seed=seeds)
def test_tensor_reduce_bitvec_on_ints(sa, dt, op, seed):
    nki, nl, nisa = legacy()
    shape, axes, spec = sa
    rng = np.random.default_rng(seed)
    x = rand_int(rng, shape, dt)
    got = apply(lambda t: nisa.tensor_reduce(getattr(nl, op), t, axis=spec), x)
    ref = getattr(np, op).reduce(x, axis=axes)
    if ref.ndim < 2:
        ref = ref.reshape(ref.shape + (1,) * (2 - ref.ndim))
    assert_exact(got, ref.astype(dt))


@SETTINGS
@given(sa=shape_and_axes(max_free=256), dt=st.sampled_from([F32, BF16, I32]),
       op=st.sampled_from(["logical_or", "logical_and", "logical_xor"]), seed=seeds)
def test_tensor_reduce_logical(sa, dt, op, seed):
    """Logical reductions (legal per the ALU table) give 1/0 for 'any/all/odd count of nonzero'."""
    nki, nl, nisa = legacy()
    shape, axes, spec = sa
    rng = np.random.default_rng(seed)
    x = (rng.random(shape) < rng.choice([0.05, 0.5, 0.97])).astype(dt)
    got = apply(lambda t: nisa.tensor_reduce(getattr(nl, op), t, axis=spec, dtype=F32), x)
    nz = f64(x) != 0
    ref = {"logical_or": np.any(nz, axis=axes), "logical_and": np.all(nz, axis=axes),
           "logical_xor": (np.sum(nz, axis=axes) % 2) == 1}[op].astype(np.float32)
    if ref.ndim < 2:
        ref = ref.reshape(ref.shape + (1,) * (2 - ref.ndim))
    assert_exact(got, ref)


def test_tensor_reduce_axes_must_be_trailing_free_axes():
    from trnsim.errors import KernelError
    nki, nl, nisa = legacy()
    x = np.ones((4, 3, 5), np.float32)
    for bad in ((1,), (0, 1, 2), (0,)):
        with pytest.raises(KernelError):
            apply(lambda t: nisa.tensor_reduce(nl.add, t, axis=bad), x)


# --------------------------------------------------------------------------------------------
# nl.* reductions (any free axes)

@SETTINGS
@given(shape=tile_shapes(max_free=512), dt=st.sampled_from(FLOATS), seed=seeds,
       name=st.sampled_from(["sum", "max", "min", "prod", "mean", "all", "any"]),
       keepdims=st.booleans(), data=st.data())
def test_nl_reductions(shape, dt, seed, name, keepdims, data):
    nki, nl, nisa = legacy()
    nd = len(shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(1, nd - 1), min_size=1),
                                  label="axes")))
    if name == "mean":  # nl.mean keeps the trailing-axes rule of tensor_reduce
        axes = tuple(range(axes[0], nd))
    rng = np.random.default_rng(seed)
    if name == "prod":
        x = rand_float(rng, shape, dt, lo=0.5, hi=2.0, positive=True, scale_exp=(0, 0))
    elif name in ("all", "any"):
        x = (rng.random(shape) < rng.choice([0.1, 0.9, 1.0])).astype(dt)
    else:
        x = rand_float(rng, shape, dt)
    got = apply(lambda t: getattr(nl, name)(t, axis=list(axes), keepdims=keepdims), x)
    v = f64(x)
    ref = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "mean": np.mean,
           "all": lambda a, axis, keepdims: np.all(a != 0, axis=axis, keepdims=keepdims),
           "any": lambda a, axis, keepdims: np.any(a != 0, axis=axis, keepdims=keepdims)}[name](
        v, axis=axes, keepdims=keepdims)
    if ref.ndim < 2:
        ref = ref.reshape(ref.shape + (1,) * (2 - ref.ndim))
    od = np.dtype(np.bool_) if name == "all" else dt  # legacy nl.all defaults to dtype=bool
    assert got.shape == ref.shape
    assert got.dtype == od, (name, got.dtype)
    n = int(np.prod([shape[a] for a in axes]))
    if name in ("max", "min"):
        assert_exact(got, write(ref, od), signed_zero=False)
    elif name in ("all", "any"):
        assert_exact(got, write(ref.astype(np.float64), od))
    elif name == "prod":
        assert_close(got, write(ref, od), dt=od, ulps=1.0, rtol=(n + 1) * 2.0 ** -24)
    else:
        a = np.sum(np.abs(v), axis=axes, keepdims=keepdims).reshape(ref.shape)
        if name == "mean":  # sum, then one multiply by 1/n (itself rounded)
            _check_sum(got, ref, a / n, n + 3, od)
        else:
            _check_sum(got, ref, a, n, od)


# --------------------------------------------------------------------------------------------
# across partitions

@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from(FLOATS), seed=seeds,
       op=st.sampled_from(["add", "maximum"]))
def test_tensor_partition_reduce_float(shape, dt, seed, op):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, shape, dt)
    got = apply(lambda t: nisa.tensor_partition_reduce(getattr(nl, op), t), x)
    v = f64(x)
    assert got.shape == (1,) + shape[1:] and got.dtype == dt
    if op == "maximum":
        assert_exact(got, write(v.max(axis=0, keepdims=True), dt), signed_zero=False)
    else:
        _check_sum(got, v.sum(axis=0, keepdims=True), np.abs(v).sum(axis=0, keepdims=True),
                   shape[0], dt)


@SETTINGS
@given(shape=tile_shapes(max_free=256), dt=st.sampled_from([I32, U8, U16, U32]), seed=seeds,
       op=st.sampled_from(["bitwise_or", "bitwise_and"]))
def test_tensor_partition_reduce_bitwise(shape, dt, seed, op):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_int(rng, shape, dt)
    got = apply(lambda t: nisa.tensor_partition_reduce(getattr(nl, op), t), x)
    assert_exact(got, getattr(np, op).reduce(x, axis=0, keepdims=True).astype(dt))


# --------------------------------------------------------------------------------------------
# tensor_scalar_reduce

@SETTINGS
@given(shape=tile_shapes(max_free=512), dt=st.sampled_from(FLOATS), seed=seeds,
       op0=st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]),
       red=st.sampled_from(["add", "maximum", "minimum"]), col=st.booleans(),
       out=st.sampled_from([None, F32, BF16]))
def test_tensor_scalar_reduce(shape, dt, seed, op0, red, col, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    P = shape[0]
    x = rand_float(rng, shape, dt)
    c = rand_float(rng, (P, 1), F32)
    s = float(np.float32(rng.standard_normal() * 2))

    @nki.jit
    def k(xin, cin):
        o = nl.ndarray(shape, dtype=out or dt, buffer=nl.shared_hbm)
        r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(xin)
        ct = nl.load(cin)
        res = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        y = nisa.tensor_scalar_reduce(data=t, op0=getattr(nl, op0), operand0=ct if col else s,
                                      reduce_op=getattr(nl, red), reduce_res=res, dtype=out)
        nl.store(o, value=y)
        nl.store(r, value=res)
        return o, r

    got, rr = run(k, x, c)
    v0 = f64(c).reshape((P,) + (1,) * (len(shape) - 1)) if col else np.float64(s)
    with np.errstate(all="ignore"):
        e = _r32({"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                  "maximum": np.maximum, "minimum": np.minimum}[op0](f64(x), v0))
    od = dt if out is None else out
    e = np.broadcast_to(e, shape)
    assert_exact(got, write(e, od), signed_zero=op0 not in ("maximum", "minimum"))
    flat = e.reshape(P, -1)
    if red == "add":
        _check_sum(rr, flat.sum(axis=1, keepdims=True),
                   np.abs(flat).sum(axis=1, keepdims=True), flat.shape[1], F32)
    else:
        ref = (flat.max if red == "maximum" else flat.min)(axis=1, keepdims=True)
        assert_exact(rr, write(ref, F32), signed_zero=False)


# --------------------------------------------------------------------------------------------
# tensor_tensor_scan

SCAN_OPS = ["add", "subtract", "multiply", "maximum", "minimum"]


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 200), d0=st.sampled_from(FLOATS),
       d1=st.sampled_from(FLOATS), op0=st.sampled_from(SCAN_OPS), op1=st.sampled_from(SCAN_OPS),
       rev0=st.booleans(), rev1=st.booleans(), init_tile=st.booleans(), seed=seeds,
       out=st.sampled_from([None, F32, BF16]))
def test_tensor_tensor_scan(P, F, d0, d1, op0, op1, rev0, rev1, init_tile, seed, out):
    """r[:, i] = op1(op0(data0[:, i], r[:, i-1]), data1[:, i]), r[:, -1] = initial; reverse0
    makes data0 the rhs of op0, reverse1 makes data1 the lhs of op1.  The carried value is fp32."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    a = rand_float(rng, (P, F), d0, lo=-2, hi=2, scale_exp=(-1, 0))
    b = rand_float(rng, (P, F), d1, lo=-2, hi=2, scale_exp=(-1, 0))
    it = rand_float(rng, (P, 1), F32, lo=-2, hi=2)
    s = float(np.float32(rng.uniform(-1, 1)))
    got = apply(lambda x, y, z: nisa.tensor_tensor_scan(x, y, z if init_tile else s,
                                                        getattr(nl, op0), getattr(nl, op1),
                                                        reverse0=rev0, reverse1=rev1,
                                                        dtype=out), a, b, it)
    f = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
         "maximum": np.maximum, "minimum": np.minimum}
    prev = f64(it)[:, 0] if init_tile else np.full(P, s)
    A, B = f64(a), f64(b)
    res = np.empty((P, F))
    with np.errstate(all="ignore"):
        for i in range(F):
            t = _r32(f[op0](prev, A[:, i]) if rev0 else f[op0](A[:, i], prev))
            prev = _r32(f[op1](B[:, i], t) if rev1 else f[op1](t, B[:, i]))
            res[:, i] = prev
    od = ref_promote(d0, d1) if out is None else out  # docs: promoted dtype of data0/data1
    assert got.dtype == od
    assert_exact(got, write(res, od), signed_zero=not ({op0, op1} & {"maximum", "minimum"}))


# --------------------------------------------------------------------------------------------
# max8, bn_stats / bn_aggr

@SETTINGS
@given(P=st.integers(1, 128), free=st.sampled_from([(8,), (9,), (100,), (1000,), (4, 16),
                                                    (3, 5, 7), (16384,)]),
       dt=st.sampled_from(FLOATS), seed=seeds, out=st.sampled_from([None, F32]),
       ties=st.booleans())
def test_max8(P, free, dt, seed, out, ties):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    shape = (P,) + free
    x = rand_float(rng, shape, dt, special=0.0)
    if ties:
        x = np.round(f64(x)).astype(dt)
    got = apply(lambda t: nisa.max8(src=t, dtype=out), x)
    v = f64(x).reshape(P, -1)
    ref = -np.sort(-v, axis=1)[:, :8]
    od = dt if out is None else out
    assert got.shape == (P, 8) and got.dtype == od
    assert_exact(got, write(ref, od), signed_zero=False)


def test_max8_size_limits():
    from trnsim.errors import ShapeError
    nki, nl, nisa = legacy()
    with pytest.raises(ShapeError):
        apply(lambda t: nisa.max8(src=t), np.ones((4, 7), np.float32))
    with pytest.raises(ShapeError):
        apply(lambda t: nisa.max8(src=t), np.ones((2, 16385), np.float32))


@SETTINGS
@given(P=st.integers(1, 128), chunks=st.lists(st.integers(1, 512), min_size=1, max_size=3),
       dt=st.sampled_from([F32, BF16, F16]), seed=seeds, offset=st.floats(-100, 100))
def test_bn_stats_and_bn_aggr(P, chunks, dt, seed, offset):
    """bn_stats: per partition (count, mean, var*count) of even and of odd elements; bn_aggr
    combines any number of such triples into (mean, variance) of all elements.  Results are
    computed in fp32; tolerance is the fp32 summation bound scaled to mean(x^2)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    F = sum(chunks)
    x = (rng.standard_normal((P, F)) + offset).astype(np.float32).astype(dt)
    bounds = np.cumsum([0] + chunks)

    @nki.jit
    def k(xin):
        st_out = nl.ndarray((P, 6 * len(chunks)), dtype=nl.float32, buffer=nl.shared_hbm)
        ag_out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(xin)
        stats = nl.ndarray((P, 6 * len(chunks)), dtype=nl.float32, buffer=nl.sbuf)
        for i in range(len(chunks)):
            stats[:, 6 * i:6 * i + 6] = nisa.bn_stats(t[:, int(bounds[i]):int(bounds[i + 1])],
                                                      dtype=nl.float32)
        nl.store(st_out, value=stats)
        nl.store(ag_out, value=nisa.bn_aggr(stats, dtype=nl.float32))
        return st_out, ag_out

    st_got, ag_got = run(k, x)
    v = f64(x)
    for i in range(len(chunks)):
        c = v[:, bounds[i]:bounds[i + 1]]
        for j, part in enumerate((c[:, 0::2], c[:, 1::2])):
            n = part.shape[1]
            g = st_got[:, 6 * i + 3 * j: 6 * i + 3 * j + 3].astype(np.float64)
            assert np.all(g[:, 0] == n)
            if n == 0:
                continue
            mu = part.mean(axis=1)
            m2 = ((part - mu[:, None]) ** 2).sum(axis=1)
            sq = (part ** 2).mean(axis=1)
            assert np.all(np.abs(g[:, 1] - mu) <= (n + 2) * 2.0 ** -24 * np.abs(part).mean(1)
                          + 1e-30)
            assert np.all(np.abs(g[:, 2] - m2) <= 4 * (n + 2) * 2.0 ** -24 * n * sq + 1e-30)
    mu = v.mean(axis=1)
    var = v.var(axis=1)
    sq = (v ** 2).mean(axis=1)
    assert np.all(np.abs(ag_got[:, 0] - mu) <= (F + 8) * 2.0 ** -24 * np.abs(v).mean(1) + 1e-30)
    assert np.all(np.abs(ag_got[:, 1] - var) <= 8 * (F + 8) * 2.0 ** -24 * sq + 1e-30)


@FEW
@given(P=st.integers(1, 128), F=st.integers(1, 512), dt=st.sampled_from([F32, BF16, F16]),
       seed=seeds)
def test_bn_stats_default_dtype_is_input_dtype(P, F, dt, seed):
    """Docs: 'If dtype field is not specified, the instruction will cast the float32 results
    back to the same data type as the input data tile' (bn_stats and bn_aggr)."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P, F)).astype(np.float32).astype(dt)
    got = apply(lambda t: nisa.bn_aggr(nisa.bn_stats(t)), x)
    assert got.dtype == dt and got.shape == (P, 2)
    v = f64(x)
    # the six statistics are themselves rounded to dt before bn_aggr combines them: the even and
    # odd means each carry half an ulp of dt, then the result is rounded once more
    parts = np.maximum(np.abs(v[:, 0::2].mean(axis=1, keepdims=True)),
                       np.abs(v[:, 1::2].mean(axis=1, keepdims=True)) if F > 1 else 0)
    ref = v.mean(axis=1, keepdims=True)
    tol = ulp(parts, dt) + ulp(ref, dt) + (F + 8) * 2.0 ** -24 * np.abs(v).mean(1, keepdims=True)
    assert np.all(np.abs(got[:, :1].astype(np.float64) - ref) <= tol)


def test_bn_stats_size_limit():
    from trnsim.errors import ShapeError
    nki, nl, nisa = legacy()
    with pytest.raises(ShapeError):
        apply(lambda t: nisa.bn_stats(t), np.ones((4, 513), np.float32))


# --------------------------------------------------------------------------------------------
# nl.softmax, nl.loop_reduce

@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 512), dt=st.sampled_from([F32, BF16, F16]),
       seed=seeds, shift=st.floats(-50, 50))
def test_nl_softmax(P, F, dt, seed, shift):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((P, F)) * 3 + shift).astype(np.float32).astype(dt)
    got = apply(lambda t: nl.softmax(t, axis=1), x)
    v = f64(x)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert got.dtype == dt
    # exp in fp32 (2^-18 relative allowance as for activations), an fp32 sum of F terms, one
    # reciprocal and one multiply: relative (F + 8) * 2^-24 + 2^-18, then the output rounding
    assert_close(got, write(ref, dt), dt=dt, ulps=1.0, rtol=(F + 8) * 2.0 ** -24 + 2.0 ** -17,
                 atol=2.0 ** -40)


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 256), n=st.integers(1, 6),
       op=st.sampled_from(["add", "maximum", "minimum", "multiply"]),
       dt=st.sampled_from([F32, BF16]), acc_dt=st.sampled_from([F32, BF16]),
       seed=seeds, via_copy=st.booleans())
def test_nl_loop_reduce(P, F, n, op, dt, acc_dt, seed, via_copy):
    """``acc[...] = nl.loop_reduce(x_i, op, loop_indices=[i])`` is ``acc = op(acc, x_i)`` per
    iteration (docs: same as tensor_tensor(acc, x_i, op)), computed in fp32 and rounded into
    acc's dtype once per iteration."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    xs = rand_float(rng, (n, P, F), dt, lo=-3, hi=3, scale_exp=(-1, 1))
    tok = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum,
           "multiply": np.multiply}[op]
    init = 1.0 if op == "multiply" else 0.0

    @nki.jit
    def k(xin):
        out = nl.ndarray((P, F), dtype=acc_dt, buffer=nl.shared_hbm)
        acc = nl.full((P, F), init, dtype=acc_dt, buffer=nl.sbuf)
        for i in nl.affine_range(n):
            t = nl.load(xin[i])
            if via_copy:
                t = nisa.tensor_copy(t, dtype=nl.float32)
            acc[...] = nl.loop_reduce(t, op=tok, loop_indices=[i], dtype=acc_dt)
        nl.store(out, value=acc)
        return out

    got = run(k, xs)
    f = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply}[op]
    acc = np.full((P, F), init)
    for i in range(n):
        acc = f64(write(f(acc, f64(xs[i])), acc_dt))
    assert_exact(got, write(acc, acc_dt), signed_zero=op not in ("maximum", "minimum"))
