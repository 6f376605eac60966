"""The exit of every ISA operation: round the result into the destination (or a fresh tile), track
initialized bytes, append one Instruction.  Operand checks and reads live in operands.py (and are
re-exported here, so ops write ``base.tile`` / ``base.emit`` alike).

``emit`` is the single exit of every op.  An op called without a destination returns a *fresh*
tile; when that tile is assigned straight into a destination (``x[...] = op(...)``) the
instruction is re-pointed at the destination (see assign.py), so no copy is simulated or traced,
as the NKI compiler does.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple

import numpy as np

from ...errors import ReadOnlyError, ShapeError
from ...source import user_loc
from ..core import dtypes as dt
from ..core.context import KernelContext, fresh_region, region
from ..core.subscript import check_gather_bounds
from ..core.storage import Storage
from ..core.tensor import NkiTensor
from .operands import (  # noqa: F401  (re-exported: ops use base.<check>)
    Engine, _UNKNOWN, AutoEngine, active_free, auto_engine, engine_name, where, need_tensor,
    check_nonempty, tile, produced_at,
    implicit_copy, check_engine_access, check_partitions, check_alignment, check_free_size,
    same_partitions, read, check_owner, written, _owner_label, _owner_view, _SHADOWED, read_f32,
    f32, and_init, _align, out_dtype, op_mask, scalar_or_column, _flat, _same_layout, _rows_init)


# -- writing ---------------------------------------------------------------------------------

def new_tile(ctx: KernelContext, shape: Tuple[int, ...], dtype: np.dtype, memory: str,
             name: Optional[str] = None, fill: bool = False, loc=None) -> NkiTensor:
    """A provisional tile for a result; counted against capacity only once used as an operand."""
    sd = dt.storage_dtype(dtype, ctx.options.precise_fp)
    isz = sd.itemsize
    free = 1
    for s in shape[1:]:
        free *= s
    pstride = free * isz
    st = ctx.new_storage(memory, memory, name, shape[0] * pstride, sd, shape[0], pstride,
                         account=False, fill=fill, loc=loc)  # the producing instruction writes it next
    strides = []
    acc = isz
    for s in reversed(shape[1:]):
        strides.append(acc)
        acc *= s
    strides = (pstride,) + tuple(reversed(strides))
    t = NkiTensor(st, 0, tuple(shape), strides, dtype, 0)
    t._region = fresh_region(st, t._shape, dtype)
    return t


def _adopt(ctx: KernelContext, values, shape, dtype, memory, loc) -> Optional[NkiTensor]:
    """A result array the op just computed, rounded to the destination dtype, becomes the fresh
    tile's storage (no NaN-filled buffer to copy it into; a view is copied once); None when it
    can't (packed or tf32 types, another shape)."""
    if values is None or not ctx.numerics:
        return None
    sd = dt.storage_dtype(dtype, ctx.options.precise_fp)
    if dtype != sd or dtype.fields is not None or dtype == dt.tfloat32:
        return None  # the write would round (tf32, packed types): keep the converting path
    if values.shape != shape:
        return None
    if values.dtype != sd:
        values = ctx.convert(values, dtype)  # the rounding write() would do, into a fresh array
        if values.dtype != sd:
            return None
    if values.base is not None or not values.flags.c_contiguous:
        values = values.copy(order="C")  # a view of an operand (a DMA'd slice, a broadcast)
    isz = sd.itemsize
    free = values.size // shape[0] if shape[0] else 0
    pstride = free * isz
    st = Storage(memory=memory, kind=memory, name=f"t{next(ctx.name_counter)}",
                 nbytes=values.nbytes, sdtype=sd, partitions=shape[0], pstride=pstride,
                 loc=loc, data=values.reshape(-1).view(np.uint8), full=True)
    t = NkiTensor(st, 0, shape, values.strides, dtype, 0)
    t._region = fresh_region(st, shape, dtype)
    t._arr = values  # what array() would build: the storage seen with the tile's geometry
    return t


def check_writable(ctx: KernelContext, t: NkiTensor, op: str) -> None:
    """Raise for a write to a read-only kernel input."""
    st = t._st
    if st.readonly:
        raise ReadOnlyError(f"{op}: '{t.name}' is a read-only kernel input",
                            rule="err_cannot_update_immutable_parameter",
                            limit="kernel inputs are read-only unless nt.mutable_tensor",
                            value=f"write to '{t.name}'",
                            where=where(),
                            hint="annotate the parameter as nt.mutable_tensor (and return it), or "
                                 "write to a new nl.ndarray(..., buffer=nl.shared_hbm)")


def write(ctx: KernelContext, dst: NkiTensor, values: Optional[np.ndarray], init, mask=None,
          reduce_op: Optional[str] = None) -> None:
    """Round ``values`` into ``dst`` (masked), update its init map and, for manual placement,
    the owner map."""
    check_writable(ctx, dst, "write")
    if mask is False:
        return
    if dst._gather is not None:
        _scatter(ctx, dst, values, init, mask)
        return
    st = dst._st
    if values is not None and ctx.numerics:
        st._f32 = None
        arr = dst.array()
        if reduce_op is not None:
            from ..core.alu import BINARY
            values = BINARY[reduce_op](arr, values)
        conv = ctx.convert(values, dst._dtype)
        if conv.shape != arr.shape:
            conv = _align(conv, arr.shape)
        if mask is None:
            np.copyto(arr, conv, casting="unsafe")
        else:
            np.copyto(arr, conv, casting="unsafe", where=_align(mask, arr.shape))
    _mark_init(ctx, dst, init, mask)


def _mark_init(ctx: KernelContext, dst: NkiTensor, init, mask) -> None:
    st = dst._st
    if st.manual:
        mm = ctx.manual(st.memory)
        ov = _owner_view(mm, dst)
        me = mm.owner_id(dst._owner, _owner_label(dst))
        mm.wrote.add(me)
        if mask is None:
            ov[...] = me
        else:
            np.copyto(ov, me, where=_align(mask, ov.shape))
    if st.full and init is None:
        return
    if init is None and mask is None and not st.manual and dst._off == 0 and \
            dst.size * dst.itemsize == st.nbytes and dst.is_contiguous():
        st.full = True  # a whole-storage write: no init map needed from now on
        return
    if st.full:
        st.ensure_init_map()
        st.full = False
    iv = dst.init_view()
    if init is None:
        if mask is None:
            iv[...] = 1
            if not st.manual:
                if dst._off == 0 and dst.size * dst.itemsize == st.nbytes and dst.is_contiguous():
                    st.full = True  # a whole-storage write: skip init checks from now on
                else:
                    # re-check the whole map once per storage-size of bytes written (amortized
                    # O(1) per byte), so tensors filled block by block become "full" too
                    st.written += dst.size * dst.itemsize
                    if st.written >= st.nbytes:
                        st.written = 0
                        if st.all_initialized():
                            st.full = True
        else:
            np.copyto(iv, 1, where=_align(mask, iv.shape))
    else:
        src = _align(init, iv.shape).astype(np.uint8)
        if mask is None:
            iv[...] = src
        else:
            np.copyto(iv, src, where=_align(mask, iv.shape))


def _scatter(ctx: KernelContext, dst: NkiTensor, values, init, mask) -> None:
    g = dst._gather
    idx = check_gather_bounds(dst, mask)
    base = g.base
    check_writable(ctx, base, "write")
    if mask is None:
        sel = idx
    else:
        sel = tuple(i[mask] for i in idx)
    if values is not None and ctx.numerics:
        base._st._f32 = None
        arr = base.array()
        conv = ctx.convert(_align(values, dst.shape), dst._dtype)
        arr[sel] = conv if mask is None else conv[mask]
    st = base._st
    if st.full and init is None:
        return
    st.ensure_init_map()
    st.full = False
    iv = base.init_view()
    if init is None:
        iv[sel] = 1
    else:
        src = _align(init, dst.shape).astype(np.uint8)
        iv[sel] = src if mask is None else src[mask]


# -- the exit of every op ----------------------------------------------------------------------

class Produced:
    """Handle returned by new-API ISA calls (``NkiInstruction``): supports ``depends_on``."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def depends_on(self, *others) -> "Produced":
        """Order after ``others`` (the simulator runs in program order already)."""
        return self


def emit(ctx: KernelContext, *, dst: Optional[NkiTensor], values: Optional[np.ndarray], init,
         out_shape: Tuple[int, ...], out_dtype: np.dtype, mask, engine: str, opcode: str,
         reads: Sequence, extra_writes: Sequence = (), partitions: Optional[int] = None,
         free: Optional[int] = None, attrs: Iterable = (), memory: str = "sbuf",
         dtype_in: Optional[str] = None, reduce_op: Optional[str] = None):
    """Write the result and append the instruction.  Returns a fresh tile when ``dst`` is None."""
    if partitions is None:
        partitions = out_shape[0]
    if free is None:
        free = 1
        for s in out_shape[1:]:
            free *= s
    if dtype_in is None:
        dtype_in = dt.name(reads[0].dtype) if reads and hasattr(reads[0], "dtype") else "-"
    if dst is None:
        return emit_fresh(ctx, values, tuple(out_shape), out_dtype, engine, opcode, reads,
                          memory, partitions, free, tuple(attrs), dtype_in, init, mask,
                          extra_writes)
    rregs = [r._region or region(r) for r in reads if isinstance(r, NkiTensor)]
    loc = user_loc()
    if mask is False:
        return None
    if 0 in dst._shape:
        check_nonempty(dst, "dst", opcode)
    check_engine_access(ctx, engine, dst._st.memory, "w", opcode, "dst", dst)
    check_writable(ctx, dst, opcode)
    if tuple(dst.shape) != tuple(out_shape) and dst.size != _size(out_shape):
        raise ShapeError(f"{opcode}: destination '{dst.name}' has shape {dst.shape} but the result "
                         f"has shape {tuple(out_shape)}", rule="dst-shape", limit=tuple(out_shape),
                         value=dst.shape, where=where())
    if values is not None and values.shape != dst.shape and values.size == dst.size:
        values = values.reshape(dst.shape)
    if init is not None and init.shape != dst.shape and init.size == dst.size:
        init = init.reshape(dst.shape)
    if isinstance(mask, np.ndarray) and mask.shape != dst.shape and mask.size == dst.size:
        mask = mask.reshape(dst.shape)
    write(ctx, dst, values, init, mask, reduce_op=reduce_op)
    wregs = [region(dst)] + [region(w) for w in extra_writes]
    if reduce_op is not None:
        rregs.append(region(dst))
    if type(engine) is AutoEngine:  # left to the compiler: record the engines it may pick
        engine, attrs = auto_engine(ctx, engine, opcode, tuple(attrs))
    if mask is not None and (k := active_free(mask, free)) < free:  # a partial tile's real size
        attrs = tuple(attrs) + (("active_free", k),)
    idx = ctx.record(engine, opcode, rregs, wregs, partitions, free, dtype_in,
                     dt.name(dst._dtype), tuple(attrs), loc)
    return Produced(idx)


def emit_fresh(ctx: KernelContext, values, out_shape: Tuple[int, ...], out_dtype: np.dtype,
               engine: str, opcode: str, reads: Sequence, memory: str, partitions: int,
               free: int, attrs: tuple, dtype_in: str, init=None, mask=None,
               extra_writes: Sequence = ()) -> NkiTensor:
    """``emit`` into a fresh tile; hot ops call it directly, positionally.  An unmasked result
    with every input initialized adopts the computed array as its storage."""
    rregs = [r._region or region(r) for r in reads if isinstance(r, NkiTensor)]
    loc = user_loc()
    out = _adopt(ctx, values, out_shape, out_dtype, memory, loc) \
        if (mask is None and init is None) else None
    if out is None:
        out = new_tile(ctx, out_shape, out_dtype, memory,
                       fill=isinstance(mask, np.ndarray), loc=loc)  # masked-off lanes keep NaN
        if mask is False:
            out._mask = False
            return out
        write(ctx, out, values, init, mask)
    wregs = [out._region or region(out)]
    if extra_writes:
        wregs += [region(w) for w in extra_writes]
    if type(engine) is AutoEngine:  # left to the compiler: record the engines it may pick
        engine, attrs = auto_engine(ctx, engine, opcode, attrs)
    if mask is not None and (k := active_free(mask, free)) < free:  # a partial tile's real size
        attrs = attrs + (("active_free", k),)
    idx = ctx.record(engine, opcode, rregs, wregs, partitions, free, dtype_in,
                     dt.name(out_dtype), attrs, loc, fresh_writes=not extra_writes)
    out._fresh = (ctx, idx, engine, opcode)
    out._mask = mask
    return out


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


