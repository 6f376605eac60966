"""Scans along the free axis: ``tensor_tensor_scan`` and the cumulative ``tensor_scalar_cumulative``."""
from __future__ import annotations

import numpy as np

from ...errors import DtypeError, KernelError, MemoryAccessError, ShapeError
from ..core import dtypes as dt
from ..core.alu import BINARY, token_name
from ..core.context import current
from . import base
from .accumulate import ReduceCmd, _CUM_OPS, _cmd, _vector_accumulator
from .base import _flat, _same_layout, emit, f32, op_mask, read, tile, where


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *,
                       dtype=None, mask=None):
    """Per partition: r[:, i] = op1(op0(d0[:, i], r[:, i-1]), d1[:, i]) with r[:, -1] = initial."""
    ctx = current()
    n0, n1 = token_name(op0, "op0"), token_name(op1, "op1")
    a = tile(ctx, data0, "data0", "tensor_tensor_scan", "vector")
    b = tile(ctx, data1, "data1", "tensor_tensor_scan", "vector")
    base.same_partitions(a, b, "tensor_tensor_scan", "data0", "data1")
    if a.size != b.size:
        raise ShapeError("tensor_tensor_scan: data0 and data1 must match", rule="scan-shape",
                         limit=a.shape, value=b.shape, where=where())
    if a._st.memory == "psum" and b._st.memory == "psum":
        raise MemoryAccessError("tensor_tensor_scan: data0 and data1 cannot both be in PSUM",
                                rule="tensor_tensor-two-psum", limit="at most 1 PSUM input",
                                value="data0 and data1 in PSUM", where=where())
    va, ia = read(ctx, a, "tensor_tensor_scan")
    vb, ib = read(ctx, b, "tensor_tensor_scan")
    p = a.shape[0]
    s0, i0, st0 = base.scalar_or_column(ctx, initial, (p, 1), "initial", "tensor_tensor_scan",
                                        "vector")
    # docs: the default output dtype is data0's or data1's, whichever has the highest precision
    od = dt.as_dtype(dtype) if dtype is not None else (
        dst.dtype if dst is not None else dt.promote(a.dtype, b.dtype))
    vals = None
    if ctx.numerics:
        x, y = f32(va).reshape(p, -1), f32(vb).reshape(p, -1)
        r = np.empty_like(x)
        prev = np.broadcast_to(np.asarray(s0, np.float32).reshape(-1), (p,)).astype(np.float32)
        f0, f1 = BINARY[n0], BINARY[n1]
        for i in range(x.shape[1]):
            t0 = f0(prev, x[:, i]) if reverse0 else f0(x[:, i], prev)
            prev = f1(y[:, i], t0) if reverse1 else f1(t0, y[:, i])
            r[:, i] = prev
        vals = r.reshape(a.shape)
    init = base.and_init(a.shape, ia, None if ib is None else ib.reshape(a.shape))
    if init is not None:
        init = np.logical_and.accumulate(init.reshape(p, -1), axis=1).reshape(a.shape)
    reads = [a, b] + ([st0] if st0 is not None else [])
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=a.shape, out_dtype=od,
                mask=op_mask(mask, a.shape), engine="vector", opcode="tensor_tensor_scan",
                reads=reads, attrs=(("op0", n0), ("op1", n1)))


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=ReduceCmd.reset_reduce):
    """Per partition over the flattened free elements: ``reg = op1(op0(src[i], imm0), reg)``,
    ``dst[i] = reg``; ``reg`` starts at op1's identity (reset_reduce), keeps the Vector
    accumulator's value (reduce) or loads ``imm1`` (load_reduce)."""
    ctx = current()
    op = "tensor_scalar_cumulative"
    d = base.need_tensor(dst, "dst", op)
    t = tile(ctx, src, "src", op, "vector")
    _same_layout(t, d, op, "src", "dst")
    n0, n1 = token_name(op0, "op0"), token_name(op1, "op1")
    if n1 not in _CUM_OPS:
        raise KernelError(f"{op}: op1 must be add, subtract, multiply, max or min",
                          rule="cumulative-op", limit=sorted(_CUM_OPS), value=n1, where=where())
    if n0 not in BINARY or n0 in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                  "right_shift", "logical_shift_right", "arithmetic_shift_right"):
        raise KernelError(f"{op}: op0 must be an arithmetic operator", rule="cumulative-op",
                          value=n0, where=where())
    for x in (t, d):
        if x.dtype in (dt.int32, dt.uint32):
            raise DtypeError(f"{op}: int32/uint32 tiles are not supported", rule="cumulative-dtype",
                             limit="bf16/fp16/fp32/fp8/(u)int8/(u)int16", value=dt.name(x.dtype),
                             where=where())
    cmd = _cmd(reduce_cmd)
    if cmd not in (ReduceCmd.reset_reduce, ReduceCmd.reduce, ReduceCmd.load_reduce):
        raise KernelError(f"{op}: reduce_cmd must be reset_reduce, reduce or load_reduce",
                          rule="cumulative-cmd", value=cmd.name, where=where())
    P, F = t.shape[0], _flat(t)
    v, init = read(ctx, t, op)
    s0, i0, st0 = base.scalar_or_column(ctx, imm0, (P, 1), "imm0", op, "vector")
    reads = [t] + ([st0] if st0 is not None else [])
    acc = _vector_accumulator(ctx)
    if cmd == ReduceCmd.reset_reduce:
        acc[:P] = _CUM_OPS[n1]
    elif cmd == ReduceCmd.load_reduce:
        if imm1 is None:
            raise KernelError(f"{op}: load_reduce needs imm1", rule="cumulative-imm1",
                              value="imm1=None", where=where())
        s1, i1, st1 = base.scalar_or_column(ctx, imm1, (P, 1), "imm1", op, "vector")
        if st1 is not None:
            reads.append(st1)
        acc[:P] = np.broadcast_to(np.asarray(s1, np.float32).reshape(-1), (P,))
        init = base.and_init((P, F), init, i1)
    vals = None
    if ctx.numerics:
        x = BINARY[n0](f32(v).reshape(P, F), np.asarray(s0, np.float32).reshape(-1, 1)
                       if np.ndim(s0) else s0)
        x = np.broadcast_to(x, (P, F))
        f1 = BINARY[n1]
        out = np.empty((P, F), np.float32)
        reg = acc[:P].astype(np.float32)
        for i in range(F):
            reg = np.asarray(f1(x[:, i], reg), np.float32)
            out[:, i] = reg
        acc[:P] = reg
        vals = out.reshape(d.shape)
    init = base.and_init((P, F), None if init is None else np.asarray(init).reshape(P, F), i0)
    if init is not None:
        init = np.logical_and.accumulate(init, axis=1)
    return emit(ctx, dst=d, values=vals, init=init, out_shape=d.shape, out_dtype=d.dtype, mask=None,
                engine="vector", opcode=op, reads=reads,
                attrs=(("op0", n0), ("op1", n1), ("reduce_cmd", cmd.name)))
