"""Reductions: free-axis (Vector), across partitions (GpSimd), fused tensor_scalar+reduce, max8,
batch-norm statistics, and the legacy ``nl.loop_reduce`` accumulation."""
from __future__ import annotations

import numpy as np

from ...errors import KernelError, ShapeError
from ..core import dtypes as dt
from ..core.alu import BINARY, REDUCE, reduce_apply, token_name
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .accumulate import _vector_accumulator
from .base import emit, f32, op_mask, read, tile, where


def _axes(axis, ndim: int, op: str, trailing: bool) -> tuple:
    if axis is None:
        return tuple(range(1, ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    try:
        ax = sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axis)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}",
                         rule="reduce-axis", limit=f"ints in 1..{ndim - 1}", value=repr(axis),
                         where=where()) from None
    if not ax:
        raise ShapeError(f"{op}: axis is empty", rule="reduce-axis", limit=f"1..{ndim - 1}",
                         value=tuple(axis), where=where())
    if any(a <= 0 or a >= ndim for a in ax):
        raise ShapeError(f"{op}: reduction axes must be free axes 1..{ndim - 1} (axis 0 is the "
                         "partition dim; reduce across partitions with tensor_partition_reduce or a "
                         "matmul)", rule="reduce-axis", limit=f"1..{ndim - 1}", value=tuple(axis),
                         where=where())
    if trailing and ax != list(range(ax[0], ndim)):
        raise ShapeError(f"{op}: reduction axes must be the trailing free axes "
                         f"(a contiguous set ending at axis {ndim - 1})", rule="reduce-axis",
                         limit=f"axes k..{ndim - 1}", value=tuple(axis), where=where())
    return tuple(ax)


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    out = tuple(s for i, s in enumerate(shape) if i not in axes)
    return out if len(out) >= 2 else out + (1,) * (2 - len(out))


def reduce_free(dst, op, data, axis, *, dtype=None, mask=None, negate=False, keepdims=False,
                opcode="tensor_reduce", engine=None, trailing=True):
    """``nisa.tensor_reduce`` / ``nl.sum`` / ``nl.max``...: reduce free axes in fp32."""
    ctx = current()
    name = token_name(op, "reduce op")
    if name not in REDUCE:
        raise KernelError(f"{opcode}: {name} is not a reduction", rule="reduce-op",
                          limit=sorted(REDUCE), value=name, where=where())
    eng = base.engine_name(engine, "vector")
    t = tile(ctx, data, "data", opcode, eng)
    ax = _axes(axis, t.ndim, opcode, trailing)
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, opcode, m)
    base.check_free_size(ctx, t, "data", opcode)
    base.check_alignment(ctx, t, "data", opcode)
    out_shape = _reduced_shape(shape, ax, keepdims)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        x = v if (dt.is_int(t.dtype) and name.startswith("bitwise")) else f32(v)
        if isinstance(m, np.ndarray):
            x = np.where(m, x, REDUCE[name][1])
        r = reduce_apply(name, x, ax, keepdims)
        if negate:
            r = -r
        vals = np.asarray(r).reshape(out_shape)
    rinit = None
    if init is not None:
        iv = init.astype(bool)
        if isinstance(m, np.ndarray):
            iv = iv | ~m
        rinit = iv.all(axis=ax, keepdims=keepdims).reshape(out_shape)
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od, mask=None,
                engine=eng, opcode=opcode, reads=[t], free=t.size // shape[0],
                attrs=(("op", name), ("negate", bool(negate))))


def mean(dst, data, axis, *, dtype=None, mask=None, keepdims=False):
    """``nl.mean``: a sum and a scale (one Vector instruction plus the free scale)."""
    ctx = current()
    t = tile(ctx, data, "data", "nl.mean", "vector")
    ax = _axes(axis, t.ndim, "nl.mean", True)
    n = 1
    for a in ax:
        n *= t.shape[a]
    s = reduce_free(None, "add", t, axis, dtype=dt.float32, mask=mask, keepdims=keepdims,
                    opcode="tensor_reduce")
    from .elementwise import _tensor_scalar
    st = tile(ctx, s, "sum", "nl.mean", "vector")
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    return _tensor_scalar(ctx, dst, st, [("multiply", 1.0 / n, False)], od, None, "vector",
                          "nl.mean")


def partition_reduce(dst, op, data, *, dtype=None, mask=None):
    """``nisa.tensor_partition_reduce``: reduce across partitions on GpSimd -> one partition."""
    ctx = current()
    name = token_name(op, "op")
    if name not in ("add", "maximum", "minimum", "bitwise_or", "bitwise_and"):
        raise KernelError(f"tensor_partition_reduce: unsupported op {name}", rule="partition-reduce-op",
                          limit="add, max, min, bitwise_or, bitwise_and", value=name, where=where())
    t = tile(ctx, data, "data", "tensor_partition_reduce", "gpsimd")
    v, init = read(ctx, t, "tensor_partition_reduce")
    out_shape = (1,) + tuple(t.shape[1:])
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        x = v if name.startswith("bitwise") else f32(v)
        vals = reduce_apply(name, x, 0, True)
    rinit = None if init is None else init.astype(bool).all(axis=0, keepdims=True)
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od,
                mask=op_mask(mask, out_shape), engine="gpsimd",
                opcode="tensor_partition_reduce", reads=[t], partitions=t.shape[0],
                free=t.size // t.shape[0], attrs=(("op", name),))


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False, *,
                         dtype=None, mask=None, reduce_cmd=None, reduce_init=None,
                         reduce_res_negate=False):
    """``data op0 operand0`` plus a reduction over all free axes into ``reduce_res`` (Vector)."""
    from .accumulate import ReduceCmd
    ctx = current()
    n0 = token_name(op0, "op0")
    rn = token_name(reduce_op, "reduce_op")
    if rn not in ("add", "multiply", "maximum", "minimum"):
        raise KernelError(f"tensor_scalar_reduce: reduce_op must be add, multiply, max or min",
                          rule="tensor_scalar_reduce-op", value=rn, where=where())
    from .elementwise import TS_UNARY, apply_ts_op, check_ts_op
    check_ts_op(ctx, n0, operand0, "tensor_scalar_reduce", "op0", bitvec_ok=False)
    t = tile(ctx, data, "data", "tensor_scalar_reduce", "vector")
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, "tensor_scalar_reduce", m)
    if n0 in TS_UNARY:  # unary op0: operand0 is None or 0 and not read
        s0, st0 = None, None
    else:
        s0, i0, st0 = base.scalar_or_column(ctx, operand0, shape, "operand0",
                                            "tensor_scalar_reduce", "vector")
        init = base.and_init(shape, init, i0)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    cmd = ReduceCmd(int(reduce_cmd)) if reduce_cmd is not None else ReduceCmd.reset_reduce
    acc = _vector_accumulator(ctx)
    p = shape[0]
    if ctx.numerics:
        x = f32(v)
        vals = apply_ts_op(n0, x, s0, bool(reverse0))
        if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
            acc[:p] = REDUCE[rn][1]
        elif cmd == ReduceCmd.load_reduce and reduce_init is not None:
            acc[:p] = reduce_init if not isinstance(reduce_init, NkiTensor) else \
                f32(read(ctx, reduce_init, "reduce_init")[0]).reshape(-1)[:p]
        rv = vals if m is None else np.where(m, vals, REDUCE[rn][1])
        if cmd != ReduceCmd.reset:
            acc[:p] = BINARY[rn](acc[:p], reduce_apply(rn, rv.reshape(p, -1), 1, False))
    extra = []
    if reduce_res is not None:
        base.check_writable(ctx, reduce_res, "tensor_scalar_reduce")
        if reduce_res.shape[0] != p or reduce_res.size != p:
            raise ShapeError(f"tensor_scalar_reduce: reduce_res must be ({p}, 1)",
                             rule="reduce-res-shape", limit=(p, 1), value=reduce_res.shape,
                             where=where())
        rv = None
        if ctx.numerics:
            rv = acc[:p].copy().reshape(reduce_res.shape)
            if reduce_res_negate:
                rv = -rv
        rinit = None if init is None else init.reshape(p, -1).all(axis=1).reshape(reduce_res.shape)
        base.write(ctx, reduce_res, rv, rinit)
        extra.append(reduce_res)
    reads = [t] + ([st0] if st0 is not None else [])
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine="vector", opcode="tensor_scalar_reduce", reads=reads, extra_writes=extra,
                attrs=(("op0", n0), ("reduce_op", rn)))


def bn_stats(dst, data, *, dtype=None, mask=None):
    """(count, mean, var*count) of even and of odd elements per partition (Vector)."""
    ctx = current()
    t = tile(ctx, data, "data", "bn_stats", "vector")
    free = t.size // t.shape[0]
    lim = ctx.spec.access.bn_stats_fmax
    if free > lim:
        raise ShapeError(f"bn_stats reads {free} elements per partition", rule="bn_stats-size",
                         limit=lim, value=free, where=where())
    v, init = read(ctx, t, "bn_stats")
    p = t.shape[0]
    out_shape = (p, 6)
    # docs: without dtype= the fp32 statistics are cast back to the input tile's dtype
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        x = f32(v).reshape(p, -1)
        cols = []
        for part in (x[:, 0::2], x[:, 1::2]):
            n = part.shape[1]
            mu = part.mean(axis=1) if n else np.zeros(p, np.float32)
            var_n = ((part - mu[:, None]) ** 2).sum(axis=1) if n else np.zeros(p, np.float32)
            cols += [np.full(p, n, np.float32), mu, var_n]
        vals = np.stack(cols, axis=1).astype(np.float32)
    rinit = None if init is None else np.repeat(init.reshape(p, -1).all(axis=1, keepdims=True), 6, 1)
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od, mask=None,
                engine="vector", opcode="bn_stats", reads=[t], free=free)


def bn_aggr(dst, data, *, dtype=None, mask=None):
    """Combine bn_stats (count, mean, var*count) triples into (mean, variance) per partition."""
    ctx = current()
    t = tile(ctx, data, "data", "bn_aggr", "vector")
    free = t.size // t.shape[0]
    if free % 3:
        raise ShapeError("bn_aggr input needs a multiple of 3 elements per partition",
                         rule="bn_aggr-size", limit="multiple of 3", value=free, where=where())
    v, init = read(ctx, t, "bn_aggr")
    p = t.shape[0]
    out_shape = (p, 2)
    # docs: without dtype= the result takes the input tile's dtype (as bn_stats)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        x = f32(v).reshape(p, -1, 3).astype(np.float64)
        cnt, mu, m2 = x[..., 0], x[..., 1], x[..., 2]
        total = cnt.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            gmu = (cnt * mu).sum(axis=1) / total
            var = (m2.sum(axis=1) + (cnt * (mu - gmu[:, None]) ** 2).sum(axis=1)) / total
        vals = np.stack([gmu, var], axis=1).astype(np.float32)
    rinit = None if init is None else np.repeat(init.reshape(p, -1).all(axis=1, keepdims=True), 2, 1)
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od, mask=None,
                engine="vector", opcode="bn_aggr", reads=[t], free=free)


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None):
    """Legacy ``nl.loop_reduce``: the assignment target accumulates ``op(target, x)``."""
    from .elementwise import tensor_copy
    ctx = current()
    name = token_name(op, "op")
    # docs: the same as ``dst = tensor_tensor(dst, x, op)``, i.e. x enters the fp32 ALU at full
    # precision; rounding x to ``dtype`` first would round twice (the op result is rounded into
    # the destination's dtype when the assignment applies the reduction)
    keep = dtype
    if isinstance(x, NkiTensor) and dt.is_float(x.dtype) and dtype is not None:
        keep = dt.float32
    r = tensor_copy(None, x, dtype=keep, mask=mask, opcode="tensor_copy")
    if isinstance(r, NkiTensor):
        r._reduce_op = name
        f = r._fresh
        if f is not None:
            i = ctx.trace.resolve(f[1])
            ins = ctx.trace.instructions[i]
            ctx.trace.patch(i, opcode="tensor_tensor",
                            attrs=ins.attrs + (("op", name), ("loop_reduce", True)))
    return r


