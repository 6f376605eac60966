"""``dst[...] = value`` and ``dst += value`` with the NKI compiler's meaning.

- A temporary op result (``x[...] = nisa.activation(...)``) is written by its own instruction
  straight into ``dst``: the instruction is re-pointed, no copy is traced.
- A named tile (``t = nl.load(...); x[...] = t``) is copied by a tensor_copy instruction.
- A scalar fills ``dst`` with a memset instruction.
- ``psum[...] += nisa.nc_matmul(...)`` accumulates in PSUM (fp32); the first write to
  never-written PSUM starts the accumulation (overwrites), as the matmul accumulate flag does.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ...errors import DtypeError, KernelError, MemoryAccessError, ShapeError
from ...ir.trace import Instruction
from ..core import dtypes as dt
from ..core.context import current, region
from ..core.fastpath import product_buffers
from ..core.tensor import NkiTensor
from . import base, elementwise, hot_matmul, hot_update

_MATMUL_OPS = ("nc_matmul", "matmul", "nc_matmul_mx")
_DETACHED = np.empty(0, np.uint8)  # the storage of a product whose array was recycled
# products smaller than this come cheaply from malloc's free lists; larger ones are fresh pages
# (page faults, cold cache) each time, so they are reused (a host-side choice, not a hardware figure)
_RECYCLE_BYTES = 64 * 1024


def _same_view(a: NkiTensor, b: NkiTensor) -> bool:
    return (a._st is b._st or (a._st.data is b._st.data and a._st.manual)) and a._off == b._off \
        and a._shape == b._shape and a._strides == b._strides and a._gather is None \
        and b._gather is None


def assign(dst: NkiTensor, value: Any, *, temporary: bool) -> None:
    """``dst[...] = value``: retarget a temporary result, copy a named tile, memset a scalar."""
    ctx = current()
    if isinstance(value, NkiTensor):
        if value._mask is False and value._fresh is None:
            return  # the producing instruction was masked off entirely
        if type(value._st) is hot_update.PendingBinary and temporary and \
                hot_update.assign_into(ctx, dst, value):
            return  # computed straight into dst (before _same_view, which would compute it)
        if _same_view(dst, value):
            return  # e.g. the store-back half of ``x[...] += y``
        f = value._fresh
        if f is not None and temporary and f[0] is ctx and _retargetable(ctx, f[2], dst, value):
            _retarget(ctx, dst, value)
            return
        copy(ctx, dst, value)
        return
    if isinstance(value, (int, float, np.integer, np.floating, bool, np.bool_)):
        memset(ctx, dst, value)
        return
    raise KernelError(f"cannot assign a {type(value).__name__} to an NKI tensor inside a kernel",
                      rule="assign-type", value=type(value).__name__, where=base.where())


def _retargetable(ctx, engine: str, dst: NkiTensor, value: NkiTensor) -> bool:
    if dst._st.memory == "hbm":
        return False
    acc = getattr(ctx.spec.engines, engine)
    if "w" not in getattr(acc, dst._st.memory):
        return False
    return dst.size == value.size


def _retarget(ctx, dst: NkiTensor, value: NkiTensor) -> None:
    _, idx, engine, opcode = value._fresh
    value._fresh = None
    idx = ctx.trace.resolve(idx)
    vals = value.array() if ctx.numerics else None
    st = value._st
    init = None if st.full else value.init_view()
    if init is not None and init.all():
        init = None
    mask = value._mask
    if vals is not None and vals.shape != dst.shape:
        vals = vals.reshape(dst.shape)
        if init is not None:
            init = init.reshape(dst.shape)
        if isinstance(mask, np.ndarray):
            mask = mask.reshape(dst.shape)
    if dst._st.memory != "hbm":
        base.check_writable(ctx, dst, opcode)
    red = value._reduce_op
    base.write(ctx, dst, vals, init, mask, reduce_op=red)
    ins = ctx.trace.instructions[idx]
    reads = ins.reads + ((ctx.trace.intern(region(dst)),) if red else ())
    dreg = ctx.trace.intern(region(dst))
    ctx.trace.patch(idx, writes=(dreg,) + ins.writes[1:], reads=reads,
                    dtype_out=dt.name(dst._dtype))
    ctx.touch(dreg, idx)


def copy(ctx, dst: NkiTensor, value: NkiTensor) -> None:
    """A tensor_copy instruction (the compiler's copy for ``x[...] = named_tile``)."""
    if dst._st.memory == "hbm" or value._st.memory == "hbm":
        raise MemoryAccessError(
            f"assignment between '{value.name}' ({value._st.memory}) and '{dst.name}' "
            f"({dst._st.memory}) needs a DMA: use nl.load / nl.store / nisa.dma_copy",
            rule="err_unsupported_memory", value=f"{value._st.memory} -> {dst._st.memory}",
            where=base.where())
    engine = "vector"
    src = base.tile(ctx, value, "value", "tensor_copy", engine)
    mask = value._mask if value._mask is not False else False
    vals, init = base.read(ctx, src, "tensor_copy")
    shape = dst.shape
    if src.shape != shape:
        if src.size == dst.size and src.shape[0] == shape[0]:
            vals = vals.reshape(shape)
            init = init.reshape(shape) if init is not None else None
        else:
            try:
                vals = base._align(vals, shape)
                init = base._align(init, shape) if init is not None else None
            except ValueError:
                raise ShapeError(f"cannot assign a tile of shape {src.shape} to '{dst.name}' of "
                                 f"shape {shape}", rule="err_store_dst_shape_smaller_than_other_shape",
                                 limit=shape, value=src.shape, where=base.where()) from None
    if isinstance(mask, np.ndarray) and mask.shape != shape:
        mask = mask.reshape(shape) if mask.size == dst.size else base._align(mask, shape)
    base.emit(ctx, dst=dst, values=vals if ctx.numerics else None, init=init, out_shape=shape,
              out_dtype=dst.dtype, mask=mask, engine=engine, opcode="tensor_copy", reads=[src],
              attrs=(("implicit", True),))


def memset(ctx, dst: NkiTensor, value) -> None:
    """``dst[...] = scalar``: a memset instruction on the Vector engine."""
    if dst._st.memory == "hbm":
        raise MemoryAccessError(f"cannot fill HBM tensor '{dst.name}' from a kernel; fill an SBUF "
                                "tile and nl.store it", rule="err_unsupported_memory", value="hbm",
                                where=base.where())
    engine = "gpsimd" if dst._st.memory == "sbuf" and False else "vector"
    vals = np.full(dst.shape, value, dtype=np.float32 if isinstance(value, (float, np.floating))
                   else np.int64) if ctx.numerics else None
    if vals is not None and vals.dtype == np.int64 and not dt.is_int(dst.dtype):
        vals = vals.astype(np.float32)
    base.emit(ctx, dst=dst, values=vals, init=None, out_shape=dst.shape, out_dtype=dst.dtype,
              mask=None, engine=engine, opcode="memset", reads=[], dtype_in="-",
              attrs=(("value", float(value)),))


def inplace(dst: NkiTensor, other: Any, name: str, *, temporary: bool) -> NkiTensor:
    """``dst op= other``: PSUM accumulation of a temporary matmul result, else an ALU op."""
    ctx = current()
    if isinstance(other, NkiTensor):
        if other._mask is False and other._fresh is None:
            return dst
        f = other._fresh
        if name == "add" and f is not None and temporary and f[0] is ctx and f[3] in _MATMUL_OPS \
                and dst._st.memory == "psum" and (dst._shape == other._shape or
                                                  dst.size == other.size):
            if not hot_matmul.accumulate(ctx, dst, other, _recycle):
                accumulate_into(ctx, dst, other)
            return dst
        elementwise.tensor_tensor_into(ctx, dst, dst, other, name)
        return dst
    if isinstance(other, (int, float, np.integer, np.floating)):
        elementwise.tensor_scalar_into(ctx, dst, dst, name, other)
        return dst
    raise KernelError(f"unsupported operand for in-place {name}: {type(other).__name__}",
                      rule="operand-type", value=type(other).__name__, where=base.where())


def _recycle(prod: NkiTensor, vals: np.ndarray) -> None:
    """Hand the temporary product's array to the next matmul of its shape: ``prod`` is dead
    after its accumulation (inplace() saw no other reference to it), so its storage is detached
    first, and the array is kept only when nothing else refers to it."""
    st = prod._st
    if vals.nbytes < _RECYCLE_BYTES or prod._arr is not vals or st.data.base is not vals or \
            st.manual:
        return
    prod._arr = None
    st.data = _DETACHED
    # the caller's name, this frame's and getrefcount's argument: nothing else holds the array
    if sys.getrefcount(vals) == 3:
        product_buffers.give(vals)


def accumulate_into(ctx, dst: NkiTensor, prod: NkiTensor) -> None:
    """Add a matmul result into PSUM; bytes never written since allocation start a new group."""
    _, idx, engine, opcode = prod._fresh
    prod._fresh = None
    idx = ctx.trace.resolve(idx)
    base.check_writable(ctx, dst, opcode)
    acc_types = ctx.spec.tensor.output_dtypes  # PSUM read-add-write runs in these (fp32; +bf16 v4)
    dname = dt.name(dst._dtype)
    if dname not in acc_types:
        raise DtypeError(f"{opcode}: accumulating into PSUM tile '{dst.name}' of dtype "
                         f"{dname}", rule="psum-accumulate-dtype",
                         limit=", ".join(acc_types), value=dname, where=base.where())
    mask = prod._mask
    vals = prod.array() if ctx.numerics else None
    pinit = None if prod._st.full else prod.init_view()
    if vals is not None and vals.shape != dst.shape:
        vals = vals.reshape(dst.shape)
        pinit = pinit.reshape(dst.shape) if pinit is not None else None
        if isinstance(mask, np.ndarray):
            mask = mask.reshape(dst.shape)
    if vals is not None:
        old = dst.array()
        if dst._st.full and mask is None and pinit is None and old.dtype == np.float32 and \
                not dst._st.manual and not ctx.convert.stochastic:
            old += vals  # fp32 PSUM, fully initialized: the read-add-write in place
            dst._st._f32 = None  # fp32_dirty(), inlined
            _recycle(prod, vals)
            vals = None
        elif dst._st.full:
            vals = base.f32(old) + vals
        else:
            was = base.written(ctx, dst, opcode)
            vals = np.where(was, base.f32(old) + vals, vals)
    if vals is not None or not ctx.numerics:
        base.write(ctx, dst, vals, pinit, mask)
    tr = ctx.trace
    il = tr.instructions
    tail = il.plain_list()  # the instructions themselves when no loop block was synthesized
    ins = tail[idx] if tail is not None else il[idx]
    dreg = tr.intern(dst._region or region(dst))
    attrs = ins.attrs
    if attrs and attrs[0][0] == "accumulate":  # where nc_matmul puts it
        attrs = attrs[1:]
    else:
        attrs = tuple((k, v) for k, v in attrs if k != "accumulate")
    attrs += (("accumulate", True),)
    # the product now reads and writes the accumulator (built directly: this runs per matmul)
    new = tuple.__new__(Instruction, (
        ins.index, ins.engine, ins.opcode, ins.reads + (dreg,), (dreg,) + ins.writes[1:],
        ins.partitions, ins.free, ins.dtype_in, dname, attrs, ins.source, ins.core))
    if tail is not None:
        tail[idx] = new
    else:
        il[idx] = new
    ctx.touch(dreg, idx)
