"""DMA: ``nl.load`` / ``nl.store`` / ``nisa.dma_copy`` (incl. indirect gather/scatter through index
tiles), transposing loads, and ``dma_compute``.  DMA casts go through fp32 [DMAOV].

A DMA is where never-written on-chip values reach HBM, so it is the sink of uninitialized-value
tracking (a warning, or an error under TRNSIM_STRICT=1).
"""
from __future__ import annotations

from enum import IntEnum
from typing import Sequence

import numpy as np

from ...errors import (DtypeError, IndexingError, KernelError, MemoryAccessError,
                       PartitionError, ShapeError)
from ..core import dtypes as dt, gates
from ..core.alu import BINARY, token_name
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .base import emit, f32, op_mask, read, where


class OobMode(IntEnum):
    """``nisa.oob_mode``: an out-of-bounds DMA access is an error or skipped."""
    error = 0
    skip = 1


def _src_values(ctx, t: NkiTensor, mask, what: str):
    """Values and init of any DMA source (HBM view, gather with index tiles, on-chip tile)."""
    if 0 in t._shape:
        base.check_nonempty(t, "src", what)
    if t._st.memory != "hbm":
        if t._st.memory == "psum":
            raise MemoryAccessError(f"{what}: DMA cannot read PSUM ('{t.name}'); copy it to SBUF "
                                    "first", rule="dma-psum-source", limit="DMA reads hbm or sbuf",
                                    value="psum", where=where())
        if not t._st.accounted:
            ctx.charge(t._st, first=base.produced_at(ctx, t))
        t._fresh = None
    return read(ctx, t, what, mask if isinstance(mask, np.ndarray) else None)


def _index_tile_reads(ctx, t: NkiTensor, what: str):
    regs = []
    if t._gather is not None:
        for it in t._gather.index_tiles:
            if isinstance(it, NkiTensor):
                tt = base.tile(ctx, it, "index", what, "dma", memories=("sbuf",))
                _, iinit = read(ctx, tt, what)
                if iinit is not None:
                    ctx.report_uninit(f"{what}: index tile '{tt.name}' holds never-written values",
                                      rule="uninitialized-index")
                regs.append(tt)
    return regs


def _dma_shape_check(src_shape, dst_shape, what):
    def squeeze(s):
        return tuple(x for x in s if x != 1)
    if tuple(src_shape) != tuple(dst_shape) and squeeze(src_shape) != squeeze(dst_shape):
        n1, n2 = int(np.prod(src_shape)), int(np.prod(dst_shape))
        if n1 != n2:
            raise ShapeError(f"{what}: source {tuple(src_shape)} and destination {tuple(dst_shape)} "
                             "hold different numbers of elements",
                             rule="err_store_dst_shape_smaller_than_other_shape",
                             limit=tuple(dst_shape), value=tuple(src_shape), where=where())


def _partition_check(ctx, shape, what):
    p = shape[0] if shape else 1
    if p > ctx.spec.tile_size.pmax:
        raise PartitionError(f"{what}: the tile's first dim ({p}) becomes the partition dim",
                             rule="err_num_partition_exceed_arch_limit",
                             limit=ctx.spec.tile_size.pmax, value=p, where=where())


def load(src, *, dtype=None, mask=None, opcode="dma_copy"):
    """``nl.load``: HBM -> a new SBUF tile (the first index dim becomes the partition dim)."""
    ctx = current()
    t = base.need_tensor(src, "src", "nl.load")
    if t._st.memory != "hbm":
        raise MemoryAccessError(f"nl.load reads HBM; '{t.name}' is in {t._st.memory.upper()}",
                                rule="err_unsupported_memory", limit="hbm", value=t._st.memory,
                                where=where())
    if 0 in t._shape:
        base.check_nonempty(t, "src", "nl.load")
    shape = tuple(t.shape)
    if len(shape) == 0:
        shape = (1, 1)
    elif len(shape) == 1:
        shape = shape + (1,)
    _partition_check(ctx, shape, "nl.load")
    od = dt.as_dtype(dtype) if dtype is not None else t.dtype
    if dtype is not None:
        gates.check_dtype_supported(ctx, od)
    m = op_mask(mask, shape)
    mt = m.reshape(t.shape) if isinstance(m, np.ndarray) and t.shape != shape else m
    reads = _index_tile_reads(ctx, t, "nl.load")
    v, init = _src_values(ctx, t, mt, "nl.load") if m is not False else (None, None)
    vals = None
    if ctx.numerics and v is not None:
        vals = v.reshape(shape) if v.shape != shape else v
        if od != t.dtype:
            vals = vals if dt.is_int(t.dtype) else f32(vals)
    if init is not None:
        init = init.reshape(shape)
    return emit(ctx, dst=None, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine="dma", opcode=opcode, reads=[t] + reads, memory="sbuf",
                dtype_in=dt.name(t.dtype), attrs=(("direction", "hbm->sbuf"),))


def store(dst, value, *, mask=None):
    """``nl.store``: an SBUF tile -> HBM (a PSUM tile is first copied to SBUF, as the compiler does)."""
    ctx = current()
    d = base.need_tensor(dst, "dst", "nl.store")
    if d._st.memory != "hbm":
        raise MemoryAccessError(f"nl.store writes HBM; '{d.name}' is in {d._st.memory.upper()}",
                                rule="err_unsupported_memory", limit="hbm", value=d._st.memory,
                                where=where())
    v = value
    if isinstance(v, (int, float, np.integer, np.floating)):
        from .elementwise import memset
        v = memset(ctx, d.shape if len(d.shape) >= 2 else (1, 1), v, d.dtype)
    v = base.need_tensor(v, "value", "nl.store")
    if v._st.memory == "psum":
        from .elementwise import tensor_copy
        v = tensor_copy(None, base.tile(ctx, v, "value", "nl.store", "vector"))
        ctx.trace.patch(ctx.trace.resolve(v._fresh[1]), attrs=(("implicit", True),))
    return copy(d, v, mask=mask, opcode="dma_copy", what="nl.store")


def copy(dst, src, *, mask=None, dst_rmw_op=None, oob_mode=None, opcode="dma_copy",
         what="dma_copy", attrs=()):
    """``nisa.dma_copy``: any of HBM<->SBUF, HBM->HBM, SBUF->SBUF; element counts must match."""
    ctx = current()
    d = base.need_tensor(dst, "dst", what)
    s = base.need_tensor(src, "src", what)
    if d._st.memory == "psum":
        raise MemoryAccessError(f"{what}: DMA cannot write PSUM ('{d.name}')", rule="dma-psum-dest",
                                limit="DMA writes hbm or sbuf", value="psum", where=where())
    for t, role in ((d, "dst"), (s, "src")):
        if t._st.memory != "hbm" and (t._pdim != 0 or t._blocks is not None):
            raise IndexingError(f"{what}: {role} '{t.name}' still has block dims; index the blocks",
                                rule="err_failed_to_infer_tile_from_local_tensor",
                                limit="a tile (partition dim first)", value=t.shape, where=where())
    base.check_writable(ctx, d, what)
    for t, role in ((d, "dst"), (s, "src")):
        if 0 in t._shape:
            base.check_nonempty(t, role, what)
    dshape = tuple(d.shape)
    _dma_shape_check(s.shape, dshape, what)
    skip = oob_mode is not None and int(getattr(oob_mode, "value", oob_mode)) == OobMode.skip
    m = op_mask(mask, dshape)
    if m is False:
        return None
    reads = _index_tile_reads(ctx, s, what) + _index_tile_reads(ctx, d, what)
    ms = m.reshape(s.shape) if isinstance(m, np.ndarray) and tuple(s.shape) != dshape else m
    if skip:
        m = _skip_mask(d, m, dshape)
        ms2 = _skip_mask(s, ms, tuple(s.shape))
        if isinstance(ms2, np.ndarray) and tuple(s.shape) == dshape:
            m = ms2 if m is None else (m & ms2)
        ms = m if tuple(s.shape) == dshape else ms2
    raw = _packed_raw_copy(s.dtype, d.dtype, what)
    v, init = _src_values(ctx, s, ms, what)
    if d._st.memory == "hbm" and init is not None:
        bad = init == 0 if not isinstance(ms, np.ndarray) else (init == 0) & ms
        if bad.any():
            # the output's own "never written" check would report the same values again
            ctx.shared.setdefault("uninit_sinks", set()).add(d._st.id)
            ctx.report_uninit(f"{what} writes values derived from never-written "
                              f"{s._st.memory.upper()} memory to HBM '{d.name}'")
    vals = None
    if ctx.numerics:
        vals = v.reshape(dshape) if v.shape != dshape else v
        if d.dtype != s.dtype and not dt.is_int(s.dtype) and not raw:
            vals = f32(vals)  # casts go through fp32 [DMAOV]
    if init is not None:
        init = init.reshape(dshape)
    red = None
    if dst_rmw_op is not None:
        red = token_name(dst_rmw_op, "dst_rmw_op")
    parts = d.shape[0] if d._st.memory != "hbm" else (s.shape[0] if s._st.memory != "hbm" else 1)
    direction = f"{s._st.memory}->{d._st.memory}"
    return emit(ctx, dst=d, values=vals, init=init, out_shape=dshape, out_dtype=d.dtype, mask=m,
                engine="dma", opcode=opcode, reads=[s] + reads, partitions=parts,
                dtype_in=dt.name(s.dtype), reduce_op=red,
                attrs=(("direction", direction),) + tuple(attrs))


def _packed_raw_copy(sdt, ddt, what) -> bool:
    """MX x4 containers move as raw bits: to/from the same container or an unsigned int of the same
    width (host arrays of x4 types are uint32/uint16).  DMA casts do not cover MX types [ISA]."""
    if not (dt.is_packed(sdt) or dt.is_packed(ddt)):
        return False
    if sdt == ddt:
        return True
    ws, wd = dt.storage_dtype(sdt), dt.storage_dtype(ddt)
    if ws == wd and ws.kind == "u" and (not dt.is_packed(sdt) or not dt.is_packed(ddt)):
        return True
    raise DtypeError(f"{what}: DMA cannot convert {dt.name(sdt)} to {dt.name(ddt)}; x4-packed MX "
                     "data only moves as raw bits (same type, or uint32 / uint16 of the same width)",
                     rule="dma-mx-cast", limit=f"{dt.name(sdt)} or {ws}", value=dt.name(ddt),
                     where=where())


def _skip_mask(t: NkiTensor, m, shape):
    """oob_mode=skip: rows whose indirect index is out of range are dropped."""
    if t._gather is None:
        return m
    idx = t._gather.resolve()
    ok = np.ones(shape, bool)
    for dmi, ix in enumerate(idx):
        n = t._gather.base.shape[dmi]
        ok &= (ix >= 0) & (ix < n)
    if ok.all():
        return m
    return ok if m is None or m is False else (ok & m)


def load_transpose2d(src, *, dtype=None, mask=None):
    """HBM (a, b) -> SBUF (b, a) through the DMA engines."""
    ctx = current()
    t = base.need_tensor(src, "src", "load_transpose2d")
    if t._st.memory != "hbm":
        raise MemoryAccessError("load_transpose2d reads HBM", rule="err_unsupported_memory",
                                value=t._st.memory, where=where())
    if t.ndim != 2:
        raise ShapeError(f"load_transpose2d needs a 2-D source, got {t.shape}",
                         rule="err_exceed_max_supported_dimension", limit=2, value=t.ndim,
                         where=where())
    a, b = t.shape
    out_shape = (b, a)
    _partition_check(ctx, out_shape, "load_transpose2d")
    od = dt.as_dtype(dtype) if dtype is not None else t.dtype
    m = op_mask(mask, out_shape)
    v, init = _src_values(ctx, t, None, "load_transpose2d")
    vals = None
    if ctx.numerics:
        vals = v.T if od == t.dtype else f32(v).T
    return emit(ctx, dst=None, values=vals, init=None if init is None else init.T,
                out_shape=out_shape, out_dtype=od, mask=m, engine="dma", opcode="dma_transpose",
                reads=[t], memory="sbuf", dtype_in=dt.name(t.dtype),
                attrs=(("direction", "hbm->sbuf"), ("transpose", True)))


def dma_transpose(dst, src, *, axes=None, dtype=None, mask=None):
    """``nisa.dma_transpose``: permute dims through the DMA (HBM or SBUF source)."""
    ctx = current()
    t = base.need_tensor(src, "src", "dma_transpose")
    nd = t.ndim
    if axes is None:
        # docs: the default permutation is [1, 0], [2, 1, 0] or, for 4-D, [3, 1, 2, 0]
        # (not a full reversal)
        axes = {4: (3, 1, 2, 0)}.get(nd, tuple(reversed(range(nd))))
    axes = tuple(int(a) for a in axes)
    allowed = {(1, 0), (2, 1, 0), (3, 1, 2, 0)}
    if axes not in allowed or len(axes) != nd:
        raise ShapeError(f"dma_transpose axes {axes} are not supported for a {nd}-D source",
                         rule="dma-transpose-axes", limit=sorted(allowed), value=axes,
                         where=where())
    if t._st.memory == "psum":
        raise MemoryAccessError("dma_transpose cannot read PSUM", rule="dma-psum-source",
                                limit="DMA reads hbm or sbuf", value="psum", where=where())
    if t._st.memory != "hbm":
        if not t._st.accounted:
            ctx.charge(t._st, first=base.produced_at(ctx, t))
        t._fresh = None
    out_shape = tuple(t.shape[a] for a in axes)
    _partition_check(ctx, out_shape, "dma_transpose")
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    if dst is not None and tuple(dst.shape) != out_shape:
        raise ShapeError(f"dma_transpose: dst shape {dst.shape} must equal the permuted source "
                         f"{out_shape}", rule="dma-transpose-shape", limit=out_shape,
                         value=dst.shape, where=where())
    v, init = read(ctx, t, "dma_transpose")
    vals = None
    if ctx.numerics:
        vals = np.transpose(v, axes)
        if od != t.dtype:
            vals = f32(vals)
    return emit(ctx, dst=dst, values=vals, init=None if init is None else np.transpose(init, axes),
                out_shape=out_shape, out_dtype=od, mask=op_mask(mask, out_shape), engine="dma",
                opcode="dma_transpose", reads=[t], memory="sbuf", dtype_in=dt.name(t.dtype),
                attrs=(("direction", f"{t._st.memory}->sbuf"), ("transpose", True)))


def dma_compute(dst, srcs: Sequence, reduce_op, *, scales=None):
    """``nisa.dma_compute``: dst = reduce_op over (scaled) srcs, on the DMA engines."""
    ctx = current()
    name = token_name(reduce_op, "reduce_op")
    d = base.need_tensor(dst, "dst", "dma_compute")
    base.check_writable(ctx, d, "dma_compute")
    if not srcs or len(srcs) > 16:
        raise KernelError("dma_compute takes 1..16 sources", rule="dma-compute-sources",
                          limit=16, value=len(srcs) if srcs else 0, where=where())
    acc = None
    inits = []
    for i, sx in enumerate(srcs):
        s = base.need_tensor(sx, f"srcs[{i}]", "dma_compute")
        _dma_shape_check(s.shape, d.shape, "dma_compute")
        v, init = _src_values(ctx, s, None, "dma_compute")
        inits.append(None if init is None else init.reshape(d.shape))
        if ctx.numerics:
            x = f32(v).reshape(d.shape)
            if scales is not None:
                x = x * np.float32(scales[i])
            acc = x if acc is None else BINARY[name](acc, x)
    return emit(ctx, dst=d, values=acc, init=base.and_init(tuple(d.shape), *inits),
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="dma",
                opcode="dma_compute", reads=list(srcs), attrs=(("op", name),))
