"""What every ISA operation does, in one place: validate operands, read them, compute, round the
result into the destination (or a fresh tile), track initialized bytes, append one Instruction.

``emit`` is the single exit of every op.  In the legacy API an op returns a *fresh* tile; when that
tile is assigned straight into a destination (``x[...] = op(...)``) the instruction is re-pointed at
the destination (see assign.py), so no copy is simulated or traced, as the NKI compiler does.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import (AliasError, DtypeError, IndexingError, KernelError, MemoryAccessError,
                       PartitionError, ReadOnlyError, ShapeError, UnsupportedError)
from ...source import describe, user_loc
from ..core import dtypes as dt
from ..core.context import KernelContext, current, fresh_region, region
from ..core.index import mask_values
from ..core.indexing import check_gather_bounds
from ..core.storage import Storage
from ..core.tensor import NkiTensor


class Engine(IntEnum):
    """``nisa.engine`` (new-API numbering; the legacy enum only names the same engines)."""
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


ENGINE_NAMES = {Engine.tensor: "tensor", Engine.scalar: "scalar", Engine.gpsimd: "gpsimd",
                Engine.dma: "dma", Engine.vector: "vector", Engine.sync: "sync"}


def engine_name(engine: Any, default: str) -> str:
    """Resolve an ``engine=`` argument (enum, alias, string) to an engine name."""
    if engine is None:
        return default
    if isinstance(engine, str):
        e = engine.lower().replace("_engine", "")
        if e in ("unknown", ""):
            return default
        if e in ("tensor", "vector", "scalar", "gpsimd", "sync", "dma", "pool", "act", "pe"):
            return {"pool": "gpsimd", "act": "scalar", "pe": "tensor"}.get(e, e)
    try:
        e = Engine(int(engine))
    except (ValueError, TypeError):
        raise KernelError(f"unknown engine {engine!r}", rule="engine", value=repr(engine)) from None
    if e == Engine.unknown:
        return default
    return ENGINE_NAMES[e]


# -- operand checks --------------------------------------------------------------------------

def where() -> str:
    return describe(user_loc())


def need_tensor(x: Any, role: str, op: str) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise KernelError(f"{op}: {role} must be an NKI tensor, got {type(x).__name__}",
                          rule="operand-type", value=type(x).__name__, where=where())
    return x


def check_nonempty(t: NkiTensor, role: str, op: str) -> None:
    """Views may be empty (a shard with no rows); an instruction may not touch one."""
    for n in t._shape:
        if n == 0:
            raise ShapeError(f"{op}: {role} '{t.name}' is an empty view (shape {t.shape})",
                             rule="empty-access", limit="at least one element", value=t.shape,
                             where=where())


def tile(ctx: KernelContext, x: Any, role: str, op: str, engine: str, *,
         memories: Tuple[str, ...] = ("sbuf", "psum")) -> NkiTensor:
    """An on-chip tile operand read by ``engine``; fresh results become real allocations."""
    t = x if type(x) is NkiTensor else need_tensor(x, role, op)
    if 0 in t._shape:
        check_nonempty(t, role, op)
    st = t._st
    if st.memory == "hbm":
        raise MemoryAccessError(f"{op}: {role} '{t.name}' is in HBM; compute engines read SBUF/PSUM "
                                "only (load it with nl.load / nisa.dma_copy first)",
                                rule="err_unsupported_memory", limit="sbuf or psum", value="hbm",
                                where=where())
    if t._pdim != 0 or t._blocks is not None:
        raise IndexingError(f"{op}: {role} '{t.name}' of shape {t.shape} still has block dims; index "
                            "the blocks to get a tile", rule="err_failed_to_infer_tile_from_local_tensor",
                            limit="a tile (partition dim first)", value=t.shape, where=where())
    if st.memory not in memories:
        raise MemoryAccessError(f"{op}: {role} '{t.name}' must be in {' or '.join(memories).upper()}",
                                rule="operand-memory", limit=memories, value=st.memory,
                                where=where())
    if ctx.api == "legacy" and engine == "gpsimd" and st.memory == "psum":
        t = implicit_copy(ctx, t, role, op)  # the legacy compiler stages PSUM through SBUF
        st = t._st
    if (engine, st.memory) not in ctx.readable:
        check_engine_access(ctx, engine, st.memory, "r", op, role, t)
    if t._shape[0] > ctx.pmax:
        check_partitions(ctx, t, role, op)
    if not st.accounted:
        ctx.charge(st, first=produced_at(ctx, t))
    t._fresh = None
    return t


def produced_at(ctx: KernelContext, t: NkiTensor) -> Optional[int]:
    """Where a result tile's live range starts: just after the instruction that produced it (its
    inputs may die at that instruction and lend it their space, as a compiler's allocator does)."""
    f = t._fresh
    return ctx.trace.resolve(f[1]) + 1 if f is not None and f[0] is ctx else None


def implicit_copy(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> NkiTensor:
    """A compiler-inserted PSUM -> SBUF copy (Vector), traced with ``implicit=True``."""
    from .elementwise import tensor_copy
    src = tile(ctx, t, role, op, "vector")
    cp = tensor_copy(None, src, opcode="tensor_copy")
    if cp._fresh is not None:
        i = ctx.trace.resolve(cp._fresh[1])
        ctx.trace.patch(i, attrs=ctx.trace.instructions[i].attrs + (("implicit", True),))
    return cp


def check_engine_access(ctx: KernelContext, engine: str, memory: str, mode: str, op: str, role: str,
                        t: NkiTensor) -> None:
    if engine == "sync":
        return
    acc = getattr(ctx.spec.engines, engine)
    allowed = getattr(acc, memory)
    if mode not in allowed:
        verb = "read" if mode == "r" else "write"
        raise MemoryAccessError(f"{op}: the {engine} engine cannot {verb} {memory.upper()} "
                                f"({role} '{t.name}')",
                                rule=f"{engine}-{memory}-access",
                                limit=f"{engine} engine {memory}: '{allowed or 'no access'}'",
                                value=verb, where=where())


def check_partitions(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    p = t.shape[0]
    pmax = ctx.spec.tile_size.pmax
    if p > pmax:
        raise PartitionError(f"{op}: {role} '{t.name}' spans {p} partitions",
                             rule="err_num_partition_exceed_arch_limit", limit=pmax, value=p,
                             where=where())


def check_alignment(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    """Compute engines address partitions in aligned groups (start 0/32/64/96 by size) [ARCH2]."""
    if t._gather is not None or t._st.memory == "hbm":
        return
    if t._strides[0] == 0:
        return
    p0 = t._off // t._st.pstride if t._st.pstride else 0
    n = t.shape[0]
    for max_parts, align in ctx.spec.access.partition_alignment:
        if n <= max_parts:
            if p0 % align:
                raise PartitionError(
                    f"{op}: {role} '{t.name}' starts at partition {p0} with {n} partitions",
                    rule="partition-start-alignment",
                    limit=f"<= {max_parts} partitions must start at a multiple of {align}",
                    value=p0, where=where())
            return


def check_free_size(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    if t._st.memory == "psum":
        # the PSUM figure is the partition's whole extent (16 KiB = 4096 fp32): it limits the
        # elements an access addresses, so a stride-0 (broadcast) dim counts once; AWS's own
        # trn2 kernels read a (P, n) PSUM tile broadcast to (P, n, k) past 4096 (cores.toml)
        free = 1
        for n, s in zip(t._shape[1:], t._strides[1:]):
            if s:
                free *= n
        lim = ctx.spec.access.max_free_elements_psum
    else:
        free = t.size // t.shape[0]
        lim = ctx.spec.access.max_free_elements_sbuf
    if free > lim:
        raise ShapeError(f"{op}: {role} '{t.name}' has {free} elements per partition",
                         rule=f"{t._st.memory}-free-size", limit=lim, value=free, where=where())


def same_partitions(a: NkiTensor, b: NkiTensor, op: str, ra: str, rb: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"{op}: {ra} has {a.shape[0]} partitions but {rb} has {b.shape[0]}",
                         rule="err_num_partition_mismatch", limit=a.shape[0], value=b.shape[0],
                         where=where())


# -- reading ---------------------------------------------------------------------------------

def read(ctx: KernelContext, t: NkiTensor, what: str, mask=None):
    """(values in storage dtype, init map or None).  Checks manual-allocation clobbering."""
    if t._gather is not None:
        idx = check_gather_bounds(t, mask)
        base = t._gather.base
        arr = base.array()
        if mask is None:
            vals = arr[idx]
            init = None
            if not base._st.full:
                iv = base.init_view()[idx]
                init = None if iv.all() else iv
        else:
            vals = np.zeros(t.shape, dtype=arr.dtype)
            sel = tuple(i[mask] for i in idx)
            vals[mask] = arr[sel]
            init = None
            if not base._st.full:
                iv = np.ones(t.shape, np.uint8)
                iv[mask] = base.init_view()[sel]
                init = None if iv.all() else iv
        if init is not None:
            ctx.note_uninit_read(base, what)
        return vals, init
    st = t._st
    arr = t.array()
    init = None
    if not st.full:
        iv = t.init_view()
        ok = iv.all() if mask is None else iv[mask].all()
        if not ok:
            ctx.note_uninit_read(t, what)
            init = iv
    if st.manual:
        check_owner(ctx, t, what)
    return arr, init


def check_owner(ctx: KernelContext, t: NkiTensor, what: str) -> None:
    """A manually placed tile must still hold its own data: no other tensor (or another block of
    a mod_alloc tensor) may have written those bytes since."""
    mm = ctx.manual(t._st.memory)
    me = mm.owner_id(t._owner, _owner_label(t))
    ov = _owner_view(mm, t)
    iv = t.init_view()
    bad = ov != me
    if iv is not None:
        bad &= iv != 0
    bad &= ov != 0
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        other = int(ov[pos])
        ps = t._st.pstride
        at = t._off + sum(i * s for i, s in zip(pos, t._strides))
        lo = t._off % ps
        hi = lo + max(0, sum((n - 1) * s for n, s in zip(t.shape[1:], t._strides[1:]))) + t.itemsize
        raise AliasError(f"{what} reads '{_owner_label(t)}' but its bytes were overwritten by "
                         f"'{mm.owner_names.get(other, '?')}' (manual allocations overlap while both "
                         "are live)", rule="manual-allocation-alias",
                         limit=f"bytes {lo}..{hi - 1} of each partition owned by '{_owner_label(t)}' "
                               "until its last read",
                         value=f"'{mm.owner_names.get(other, '?')}' wrote partition {at // ps}, "
                               f"byte {at % ps}",
                         where=where(),
                         hint="give the tensors disjoint base_addr ranges, or finish reading the "
                              "first before writing the second")


def written(ctx: KernelContext, t: NkiTensor, what: str) -> np.ndarray:
    """Where ``t`` holds values it wrote itself, so PSUM accumulation continues there (elsewhere a
    new accumulation group starts).  A manually placed tensor (or mod_alloc block) that has not
    written yet starts fresh on whatever an earlier, dead tensor left in its bytes (intended
    reuse); once it has written, finding another tensor's data there means it was clobbered while
    live (AliasError)."""
    w = t.init_view() != 0
    if t._st.manual:
        mm = ctx.manual(t._st.memory)
        me = mm.owner_id(t._owner, _owner_label(t))
        if me not in mm.wrote:
            return np.zeros_like(w)
        check_owner(ctx, t, what)
        w &= _owner_view(mm, t) == me
    return w


def _owner_label(t: NkiTensor) -> str:
    o = t._owner
    if isinstance(o, tuple) and len(o) == 2 and isinstance(o[1], tuple) and o[1]:
        return f"{t.name}[block {', '.join(map(str, o[1]))}]"
    return t.name


def _owner_view(mm, t: NkiTensor) -> np.ndarray:
    return np.ndarray(t.shape, dtype=np.int32, buffer=mm.owner, offset=4 * t._off,
                      strides=tuple(4 * s for s in t._strides))


_SHADOWED = frozenset([dt.bfloat16, dt.float16])


def read_f32(ctx: KernelContext, t: NkiTensor, what: str):
    """``read`` converted to fp32; 16-bit float tiles come from the storage's cached fp32 copy
    (``Storage.f32_view``; manually placed storages alias each other, so they convert afresh)."""
    st = t._st
    if st.sdtype in _SHADOWED and not st.manual and t._gather is None and ctx.numerics:
        # read() checks init marks and manual owners: a full automatic storage has neither
        init = None if st.full else read(ctx, t, what)[1]
        return st.f32_view(t._off, t._shape, t._strides), init
    v, init = read(ctx, t, what)
    return (f32(v) if ctx.numerics else v), init


def f32(v: np.ndarray) -> np.ndarray:
    return v if v.dtype == np.float32 else v.astype(np.float32)


def and_init(shape: Tuple[int, ...], *inits) -> Optional[np.ndarray]:
    """Elementwise propagation: a result is initialized where all its inputs were."""
    out = None
    for i in inits:
        if i is None:
            continue
        i = _align(i, shape)
        out = i.astype(bool) if out is None else (out & (i != 0))
    return out


def _align(v: np.ndarray, shape) -> np.ndarray:
    if v.shape == tuple(shape):
        return v
    if v.ndim < len(shape):
        v = v.reshape(v.shape + (1,) * (len(shape) - v.ndim))
    return np.broadcast_to(v, shape)


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


def out_dtype(ctx: KernelContext, dtype_arg, *inputs) -> np.dtype:
    if dtype_arg is not None:
        d = dt.as_dtype(dtype_arg)
        check_dtype_supported(ctx, d)
        return d
    d = None
    for x in inputs:
        xd = x.dtype if isinstance(x, NkiTensor) else None
        if xd is None:
            continue
        d = xd if d is None else dt.promote(d, xd)
    return d if d is not None else dt.float32


def check_dtype_supported(ctx: KernelContext, d: np.dtype) -> None:
    n = dt.name(d)
    if n in ("float64", "int64", "uint64"):
        return  # host-side widths NKI narrows to 32 bit (DT)
    if n not in ctx.spec.dtypes:
        raise DtypeError(f"dtype {n} is not supported on {ctx.spec.name} ({ctx.options.target})",
                         rule="dtype-generation", limit=", ".join(ctx.spec.dtypes), value=n,
                         where=where())


def legacy_mask(mask, shape):
    """Normalize ``mask=`` to None / False / bool array over the op's iteration space."""
    return mask_values(mask, tuple(shape))


def scalar_or_column(ctx: KernelContext, x, shape, role: str, op: str, engine: str):
    """A scalar operand or a (P, 1) per-partition column broadcast along the free dims.

    Returns (values broadcastable to ``shape``, init or None, the tile or None)."""
    if isinstance(x, NkiTensor):
        t = tile(ctx, x, role, op, engine)
        if t.shape[0] != shape[0] and t.shape[0] != 1:
            raise ShapeError(f"{op}: {role} must have {shape[0]} partitions (or 1)",
                             rule="err_num_partition_mismatch", limit=shape[0], value=t.shape[0],
                             where=where())
        free = t.size // t.shape[0]
        if free != 1:
            raise ShapeError(f"{op}: {role} must be a scalar or a (P, 1) column, got shape {t.shape}",
                             rule="scalar-operand-shape", limit="(P, 1)", value=t.shape,
                             where=where())
        v, init = read(ctx, t, role)
        v = f32(v).reshape((t.shape[0],) + (1,) * (len(shape) - 1))
        if init is not None:
            init = init.reshape(v.shape)
        return v, init, t
    if isinstance(x, (int, float, np.integer, np.floating, bool, np.bool_, np.generic)):
        return np.float32(x), None, None  # np.generic: ml_dtypes scalars such as bfloat16(1)
    raise KernelError(f"{op}: {role} must be a scalar or a (P, 1) tile, got {type(x).__name__}",
                      rule="operand-type", value=type(x).__name__, where=where())
