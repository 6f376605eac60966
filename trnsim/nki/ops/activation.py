"""Scalar-engine activation: ``op(data * scale + bias)`` with an optional free-dim reduction into
the engine's per-partition accumulator registers; and the unary ``nl.*`` math functions.

Fusion is free on the hardware (ARCH2), so the scale and bias add no instruction.  The accumulator
registers persist between instructions per core (``reduce_cmd`` reset / reduce / load_reduce).
"""
from __future__ import annotations

import numpy as np

from ...errors import DtypeError, KernelError, ShapeError
from ..core import dtypes as dt, gates
from ..core.alu import REDUCE, UNARY, reduce_apply, token_name
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .accumulate import ReduceCmd, _accumulator
from .base import emit, f32, op_mask, read, tile, where


# the elementwise unary functions both NKI generations expose as ``nl.<name>`` (each also an
# activation token); ``unary`` below computes them
UNARY_FUNCTIONS = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "square", "abs", "negative", "sign",
                   "floor", "ceil", "trunc", "sin", "cos", "tan", "tanh", "arctan", "sigmoid",
                   "relu", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "silu",
                   "silu_dx", "softplus", "mish", "erf", "erf_dx", "invert", "logical_not", "exp2",
                   "log2")

# unary functions that run on the Scalar engine's activation table; the rest run on Vector
VECTOR_UNARY = frozenset(["abs", "negative", "sign", "floor", "ceil", "trunc", "invert",
                          "logical_not"])


def activation(dst, op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=ReduceCmd.idle, dtype=None, mask=None, opcode="activation",
               engine="scalar"):
    """``op(data * scale + bias)`` on the Scalar engine, steering its accumulator by ``reduce_cmd``."""
    ctx = current()
    name = token_name(op, "activation function")
    if name not in UNARY:
        raise KernelError(f"{opcode}: {name} is not an activation function", rule="activation-op",
                          limit=sorted(UNARY), value=name, where=where())
    t = tile(ctx, data, "data", opcode, engine)
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, opcode, m)
    base.check_free_size(ctx, t, "data", opcode)
    base.check_alignment(ctx, t, "data", opcode)
    reads = [t]
    sv, si, st = _scale(ctx, scale, shape, opcode, engine)
    if st is not None:
        reads.append(st)
    if bias is not None:
        bv, bi, bt = _bias(ctx, bias, shape, opcode, engine)
        reads.append(bt)
    else:
        bv, bi = np.float32(0.0), None
    init = base.and_init(shape, init, si, bi)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    if dtype is not None:
        gates.check_dtype_supported(ctx, od)
    vals = None
    if ctx.numerics:
        x = f32(v) * sv + bv
        vals = UNARY[name](x.astype(np.float32, copy=False))
        vals = np.asarray(vals, dtype=np.float32)
    extra = []
    cmd = ReduceCmd(int(reduce_cmd)) if reduce_cmd is not None else ReduceCmd.idle
    rname = None
    if reduce_res is not None or reduce_op is not None:
        if cmd == ReduceCmd.idle:
            cmd = ReduceCmd.reset_reduce
        rname = token_name(reduce_op, "reduce_op") if reduce_op is not None else "add"
        if rname not in REDUCE:
            raise KernelError(f"{opcode}: {rname} is not a reduction", rule="activation-reduce-op",
                              value=rname, where=where())
        if rname != "add" and opcode == "activation_reduce":
            gates.require(ctx, "activation_reduce.non_add")  # v2 accumulates with add only
    if cmd != ReduceCmd.idle:
        acc = _accumulator(ctx)
        p = shape[0]
        if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
            acc[:p] = REDUCE.get(rname or "add", (None, 0.0))[1] if rname else 0.0
        if cmd == ReduceCmd.load_reduce and reduce_res is not None:
            lv, _ = read(ctx, tile(ctx, reduce_res, "reduce_res", opcode, engine), opcode)
            acc[:p] = f32(lv).reshape(-1)[:p]
        if cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.load_reduce) and \
                ctx.numerics and vals is not None:
            rv = vals if m is None else np.where(m, vals, REDUCE[rname][1])
            part = reduce_apply(rname, rv.reshape(p, -1), 1, False)
            from ..core.alu import BINARY
            acc[:p] = BINARY[rname](acc[:p], part)
        if reduce_res is not None:
            rr = reduce_res
            base.check_writable(ctx, rr, opcode)
            if rr.size // max(rr.shape[0], 1) != 1 or rr.shape[0] != p:
                raise ShapeError(f"{opcode}: reduce_res must be a ({p}, 1) tile, got {rr.shape}",
                                 rule="reduce-res-shape", limit=(p, 1), value=rr.shape,
                                 where=where())
            rinit = None if init is None else init.reshape(p, -1).all(axis=1).reshape(rr.shape)
            base.write(ctx, rr, acc[:p].reshape(rr.shape).copy() if ctx.numerics else None, rinit)
            extra.append(rr)
    attrs = [("func", name)]
    if rname:
        attrs += [("reduce_op", rname), ("reduce_cmd", cmd.name)]
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=engine, opcode=opcode, reads=reads, extra_writes=extra, attrs=attrs)


def _scale(ctx, scale, shape, op, engine):
    if isinstance(scale, NkiTensor):
        if scale.dtype != dt.float32:
            raise DtypeError(f"{op}: a tile scale must be fp32", rule="err_activation_scale_invalid_type",
                             limit="float32", value=dt.name(scale.dtype), where=where())
        return base.scalar_or_column(ctx, scale, shape, "scale", op, engine)
    if not isinstance(scale, (int, float, np.integer, np.floating)):
        raise KernelError(f"{op}: scale must be a scalar or a (P, 1) fp32 tile",
                          rule="err_activation_scale_invalid_type", value=type(scale).__name__,
                          where=where())
    return np.float32(scale), None, None


def _bias(ctx, bias, shape, op, engine):
    if not isinstance(bias, NkiTensor):
        if isinstance(bias, (int, float, np.integer, np.floating)):
            return np.float32(bias), None, None
        raise KernelError(f"{op}: bias must be a (P, 1) tile", rule="err_activation_bias_invalid_type",
                          value=type(bias).__name__, where=where())
    if bias.dtype not in (dt.float32, dt.float16, dt.bfloat16):
        raise DtypeError(f"{op}: bias must be fp32, fp16 or bf16",
                         rule="err_activation_bias_invalid_type", limit="float32/float16/bfloat16",
                         value=dt.name(bias.dtype), where=where())
    v, i, t = base.scalar_or_column(ctx, bias, shape, "bias", op, engine)
    return v, i, t


def activation_reduce(dst, op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, dtype=None,
                      mask=None):
    """activation plus a free-axis reduction into ``reduce_res`` (reset_reduce)."""
    return activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                      reduce_res=reduce_res, reduce_cmd=ReduceCmd.reset_reduce, dtype=dtype,
                      mask=mask, opcode="activation_reduce")


def unary(name: str, x, *, dtype=None, mask=None, dst=None, engine=None):
    """``nl.exp(x)`` and friends."""
    ctx = current()
    if name in VECTOR_UNARY:
        eng = base.engine_name(engine, "vector")
        t = tile(ctx, x, "x", f"nl.{name}", eng)
        shape = t.shape
        m = op_mask(mask, shape)
        v, init = read(ctx, t, f"nl.{name}", m)
        od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
        vals = None
        if ctx.numerics:
            src = v if (dt.is_int(t.dtype) and name in ("abs", "negative", "invert", "sign")) else f32(v)
            # int64: |int8 -128| is 128 (then saturated by the write), not a wrapped -128
            vals = UNARY[name](src) if name != "abs" or src.dtype.kind == "f" else \
                np.abs(src.astype(np.int64))
            if name == "negative" and src.dtype.kind in "iu":
                vals = -src.astype(np.int64)
        return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                    engine=eng, opcode="tensor_scalar", reads=[t], attrs=(("op0", name),))
    return activation(dst, name, x, dtype=dtype, mask=mask,
                      engine=base.engine_name(engine, "scalar"))
