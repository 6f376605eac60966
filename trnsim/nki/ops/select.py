"""Select and predication: ``nl.where``, ``affine_select``, ``tensor_copy_predicated`` and the selects
with a running reduction (``select_reduce``, ``range_select``)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...errors import DtypeError, KernelError, ShapeError
from ..core import dtypes as dt, gates
from ..core.alu import BINARY, token_name
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .accumulate import ReduceCmd, _cmd, _reduce_into
from .elementwise import out_for
from .base import _flat, _same_layout, emit, f32, op_mask, read, tile, where


def select(dst, cond, x, y, *, dtype=None, mask=None, engine=None):
    """``nl.where(cond, x, y)``: per element ``x if cond else y`` (x, y tiles or scalars)."""
    ctx = current()
    eng = base.engine_name(engine, "vector")
    c = tile(ctx, cond, "condition", "select", eng)
    parts = [c]
    shapes = [c.shape]
    vals_in = {}
    inits = []
    for role, v in (("x", x), ("y", y)):
        if isinstance(v, NkiTensor):
            t = tile(ctx, v, role, "select", eng)
            parts.append(t)
            shapes.append(t.shape)
    try:
        shape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"select: condition and operand shapes {shapes} do not broadcast",
                         rule="broadcast-shape", limit="numpy-broadcastable shapes",
                         value=tuple(shapes), where=where()) from None
    m = op_mask(mask, shape)
    cv, ci = read(ctx, c, "select")
    inits.append(ci)
    for role, v in (("x", x), ("y", y)):
        if isinstance(v, NkiTensor):
            vv, vi = read(ctx, v, "select")
            vals_in[role] = f32(vv)
            inits.append(vi)
        else:
            vals_in[role] = np.float32(v)
    od = dt.as_dtype(dtype) if dtype is not None else (
        dst.dtype if dst is not None else out_for(x, y))
    vals = None
    if ctx.numerics:
        vals = np.broadcast_to(np.where(f32(cv) != 0, vals_in["x"], vals_in["y"]), shape)
    init = base.and_init(shape, *inits)
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode="select", reads=parts)


def affine_select(dst, on_true_tile, on_false_value, predicate: Callable, *, dtype=None,
                  mask=None):
    """``affine_select`` on GpSimd: ``on_true_tile`` where ``predicate(shape)`` (a bool array over the
    tile's index space, which the front end builds from its affine condition) holds, else the
    scalar ``on_false_value``."""
    ctx = current()
    t = tile(ctx, on_true_tile, "on_true_tile", "affine_select", "gpsimd")
    return _select_core(ctx, dst, t, predicate(t.shape), on_false_value, dtype, mask)


def _select_core(ctx, dst, t, pv, on_false_value, dtype, mask):
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, "affine_select", m)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = np.where(pv, f32(v), np.float32(on_false_value)) if ctx.numerics else None
    if init is not None:
        init = init.astype(bool) | ~pv  # the false value needs no input
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine="gpsimd", opcode="affine_select", reads=[t])


def copy_predicated(dst, src, predicate, *, reverse_pred=False, mask=None):
    """Copy src (tile or scalar) into dst where predicate holds; elsewhere dst is unchanged."""
    ctx = current()
    d = base.need_tensor(dst, "dst", "tensor_copy_predicated")
    p = tile(ctx, predicate, "predicate", "tensor_copy_predicated", "vector")
    pv, pinit = read(ctx, p, "tensor_copy_predicated")
    cond = (pv.reshape(d.shape) != 0)
    if reverse_pred:
        cond = ~cond
    reads = [p]
    if isinstance(src, NkiTensor):
        s = tile(ctx, src, "src", "tensor_copy_predicated", "vector")
        if s.size != d.size:
            raise ShapeError("tensor_copy_predicated: src and dst must match", rule="dst-shape",
                             limit=d.shape, value=s.shape, where=where())
        sv, sinit = read(ctx, s, "tensor_copy_predicated")
        sv = sv.reshape(d.shape)
        reads.append(s)
    else:
        sv, sinit = np.full(d.shape, src, np.float32), None
    m = cond if mask is None else (cond & op_mask(mask, d.shape))
    return emit(ctx, dst=d, values=sv if ctx.numerics else None,
                init=None if sinit is None else sinit.reshape(d.shape), out_shape=d.shape,
                out_dtype=d.dtype, mask=m, engine="vector", opcode="tensor_copy_predicated",
                reads=reads)


FP32_MIN = float(np.finfo(np.float32).min)


_COMPARE = ("equal", "less", "less_equal", "greater", "greater_equal")


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=ReduceCmd.idle,
                  reduce_op="maximum", reverse_pred=False):
    """dst = where(predicate (xor reverse_pred), on_true, on_false) on the Vector engine;
    optionally the per-partition max of the result goes to the accumulator / ``reduce_res``.
    ``on_false`` is an fp32 scalar or a (P, 1) column; ``predicate`` an integer tile."""
    ctx = current()
    op = "select_reduce"
    d = base.need_tensor(dst, "dst", op)
    pr = tile(ctx, predicate, "predicate", op, "vector")
    t = tile(ctx, on_true, "on_true", op, "vector")
    if pr._st.memory == "psum" and t._st.memory == "psum":
        raise KernelError(f"{op}: on_true and predicate cannot both be in PSUM",
                          rule="tensor_tensor-two-psum", where=where())
    if not dt.is_int(pr.dtype):
        raise DtypeError(f"{op}: predicate must be an integer tile", rule="predicate-dtype",
                         limit="int8/uint8/int16/uint16", value=dt.name(pr.dtype), where=where())
    if t.dtype in (dt.tfloat32, dt.int32, dt.uint32):
        raise DtypeError(f"{op}: on_true cannot be {dt.name(t.dtype)}", rule="select-dtype",
                         limit="not tfloat32/int32/uint32", value=dt.name(t.dtype), where=where())
    _same_layout(t, pr, op, "on_true", "predicate")
    _same_layout(t, d, op, "on_true", "dst")
    rname = token_name(reduce_op, "reduce_op")
    if rname != "maximum":
        raise KernelError(f"{op}: reduce_op must be nl.maximum", rule="select-reduce-op",
                          limit="maximum", value=rname, where=where())
    P, F = t.shape[0], _flat(t)
    pv, pinit = read(ctx, pr, op)
    tv, tinit = read(ctx, t, op)
    fv, finit, ft = base.scalar_or_column(ctx, on_false, (P, F), "on_false", op, "vector")
    cond = (np.asarray(pv).reshape(P, F) != 0) ^ bool(reverse_pred)
    vals = np.where(cond, f32(tv).reshape(P, F), fv) if ctx.numerics else None
    ti = None if tinit is None else (tinit.reshape(P, F).astype(bool) | ~cond)
    fi = None if finit is None else (np.broadcast_to(finit.reshape(P, 1), (P, F)) | cond)
    init = base.and_init((P, F), None if pinit is None else pinit.reshape(P, F), ti, fi)
    cmd = _cmd(reduce_cmd)
    if cmd == ReduceCmd.idle and reduce_res is not None:
        cmd = ReduceCmd.reset_reduce
    extra: list = []
    rows = vals.max(axis=1) if vals is not None else None
    rinit = None if init is None else init.all(axis=1)
    _reduce_into(ctx, op, P, cmd, rname, rows, reduce_res, rinit, extra)
    reads = [pr, t] + ([ft] if ft is not None else [])
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(d.shape), init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="vector", opcode=op,
                reads=reads, extra_writes=extra, attrs=(("reduce_cmd", cmd.name),))


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=ReduceCmd.reset_reduce, reduce_res=None, reduce_op="maximum",
                 range_start=0, on_false_value=FP32_MIN):
    """Keep ``on_true_tile[p, i]`` where ``comp_op0(range_start + i, bound0[p])`` and
    ``comp_op1(range_start + i, bound1[p])`` both hold (fp32 compares), else ``on_false_value``;
    the per-partition max goes to the Vector accumulator / ``reduce_res`` (gen3+)."""
    ctx = current()
    op = "range_select"
    gates.require(ctx, op)
    d = base.need_tensor(dst, "dst", op)
    t = tile(ctx, on_true_tile, "on_true_tile", op, "vector")
    if not dt.is_float(t.dtype) or t.dtype == dt.tfloat32:
        raise DtypeError(f"{op}: on_true_tile must be a float tile", rule="range-select-dtype",
                         limit="fp8/bf16/fp16/fp32", value=dt.name(t.dtype), where=where())
    n0, n1 = token_name(comp_op0, "comp_op0"), token_name(comp_op1, "comp_op1")
    for n in (n0, n1):
        if n not in _COMPARE:
            raise KernelError(f"{op}: comparison must be one of {', '.join(_COMPARE)}",
                              rule="range-select-compare", limit=_COMPARE, value=n, where=where())
    rname = token_name(reduce_op, "reduce_op")
    if rname != "maximum":
        raise KernelError(f"{op}: reduce_op must be nl.maximum", rule="range-select-reduce-op",
                          limit="maximum", value=rname, where=where())
    if not isinstance(range_start, (int, np.integer)):
        raise KernelError(f"{op}: range_start must be a compile-time integer",
                          rule="range-select-start", value=type(range_start).__name__,
                          where=where())
    _same_layout(t, d, op, "on_true_tile", "dst")
    P, F = t.shape[0], _flat(t)
    bounds = []
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        bt = tile(ctx, b, role, op, "vector")
        if bt.shape[0] != P or bt.size != P:
            raise ShapeError(f"{op}: {role} must be a ({P}, 1) tile, got {bt.shape}",
                             rule="range-select-bound", limit=(P, 1), value=bt.shape,
                             where=where())
        if bt.dtype != dt.float32:
            raise DtypeError(f"{op}: {role} must be float32", rule="range-select-bound-dtype",
                             limit="float32", value=dt.name(bt.dtype), where=where())
        bv, bi = read(ctx, bt, op)
        bounds.append((bt, f32(bv).reshape(P, 1), bi))
    tv, tinit = read(ctx, t, op)
    idx = (np.float32(range_start) + np.arange(F, dtype=np.float32)).reshape(1, F)
    m = (BINARY[n0](idx, bounds[0][1]) != 0) & (BINARY[n1](idx, bounds[1][1]) != 0)
    vals = np.where(m, f32(tv).reshape(P, F), np.float32(on_false_value)) if ctx.numerics else None
    init = base.and_init((P, F), None if tinit is None else (tinit.reshape(P, F).astype(bool) | ~m),
                         bounds[0][2], bounds[1][2])
    extra: list = []
    rows = vals.max(axis=1) if vals is not None else None
    rinit = None if init is None else init.all(axis=1)
    cmd = _cmd(reduce_cmd)
    _reduce_into(ctx, op, P, cmd, rname, rows, reduce_res, rinit, extra)
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(d.shape), init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="vector", opcode=op,
                reads=[t, bounds[0][0], bounds[1][0]], extra_writes=extra,
                attrs=(("reduce_cmd", cmd.name), ("op0", n0), ("op1", n1)))
