"""Tensor allocation: ``nl.ndarray`` and friends, automatic or manual (``mod_alloc``/``alloc``/
``address=``) placement, capacity accounting, shared HBM across SPMD instances."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import numpy as np

from ...errors import (CapacityError, IndexingError, KernelError, PartitionError, ShapeError,
                       UnsupportedError)
from ...source import describe, user_loc
from . import dtypes as dt
from .context import KernelContext, current, region
from .conventions import Conventions
from .gates import check_dtype_supported
from .index_exprs import ParDim, _is_int
from .storage import Storage
from .tensor import BlockMap, NkiTensor


class Buffer:
    """A memory name: ``nl.sbuf``, ``nl.psum``, ``nl.hbm``, ``nl.shared_hbm``, ``nl.private_hbm``."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"nl.{self.name}"

    def __eq__(self, other):
        return isinstance(other, Buffer) and other.name == self.name or other == self.name

    def __hash__(self):
        return hash(self.name)

    @property
    def memory(self) -> str:
        """The memory behind the buffer: sbuf, psum or hbm."""
        return "hbm" if "hbm" in self.name else self.name


sbuf = Buffer("sbuf")
psum = Buffer("psum")
hbm = Buffer("hbm")
shared_hbm = Buffer("shared_hbm")
private_hbm = Buffer("private_hbm")
BUFFERS = {b.name: b for b in (sbuf, psum, hbm, shared_hbm, private_hbm)}


class ModAlloc:
    """``ncc.sbuf.mod_alloc`` / ``ncc.psum.mod_alloc``: block i lives in tile ``i mod n``."""

    def __init__(self, memory: str, *, base_addr: int = 0, base_partition: int = 0,
                 base_bank: int = 0, num_par_tiles=(), num_free_tiles=(), num_bank_tiles=()):
        self.memory = memory
        self.base_addr = int(base_addr)
        self.base_partition = int(base_partition)
        self.base_bank = int(base_bank)
        self.num_par_tiles = tuple(num_par_tiles)
        self.num_tiles = tuple(num_bank_tiles if memory == "psum" else num_free_tiles)

    def __repr__(self):
        return f"{self.memory}.mod_alloc(base_addr={self.base_addr}, tiles={self.num_tiles})"


class CallbackAlloc:
    """``ncc.sbuf.alloc(fn)`` / ``ncc.psum.alloc(fn)``: fn(block_idx, pdim_size, fdim_size)
    returns (partition, address) for SBUF or (bank, partition, offset) for PSUM."""

    def __init__(self, memory: str, fn: Callable):
        self.memory = memory
        self.fn = fn


class AutoAlloc:
    """Automatic placement in a memory (the compiler chooses the address)."""
    def __init__(self, memory: str):
        self.memory = memory


class AddressAlloc:
    """New-API ``address=(partition_offset, byte_offset)``."""

    def __init__(self, memory: str, address):
        self.memory = memory
        self.address = tuple(address)


def _where():
    return describe(user_loc())


def parse_shape(shape, block_dims: bool, on_chip: bool) -> Tuple[Tuple[int, ...], int]:
    """(plain int shape, index of the partition dim); ``block_dims``: dims may precede par_dim."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        items = tuple(shape)
    except TypeError:
        raise ShapeError(f"shape must be a tuple of integers, got {shape!r}", rule="shape-type",
                         value=repr(shape), where=_where()) from None
    pds = [i for i, s in enumerate(items) if isinstance(s, ParDim)]
    out = []
    for s in items:
        if not _is_int(s) or int(s) <= 0:
            raise ShapeError(f"shape entries must be positive integers, got {shape!r}",
                             rule="shape-value", value=repr(shape), where=_where())
        out.append(int(s))
    if len(pds) > 1:
        raise ShapeError("only one par_dim may appear in a shape", rule="par-dim", value=shape,
                         where=_where())
    pdim = pds[0] if pds else 0
    if pds and not block_dims and on_chip and pdim != 0:
        raise ShapeError("block dimensions (par_dim not first) are legacy-only",
                         rule="err_leading_dimension_of_tensor_must_be_partition", value=shape,
                         where=_where())
    return tuple(out), pdim


def ndarray(shape, dtype, buffer=None, name: str = "", *, conv: Conventions, address=None,
            loc=None, poison: bool = True) -> NkiTensor:
    """An allocation under the front end's compiler conventions ``conv``; ``poison=False`` skips the
    NaN fill of an automatically placed on-chip buffer for callers that write every byte next
    (``fill``: nl.zeros/ones/full)."""
    ctx = current()
    d = dt.as_dtype(dtype)
    check_dtype_supported(ctx, d)
    alloc = _resolve_buffer(buffer, conv.buffer_names, address)
    memory = alloc.memory
    if memory in ("hbm", "shared_hbm", "private_hbm"):
        return _hbm(ctx, shape, d, memory, name, conv.block_dims)
    shp, pdim = parse_shape(shape, conv.block_dims, True)
    P = shp[pdim]
    pmax = ctx.spec.tile_size.pmax
    if P > pmax:
        raise PartitionError(f"'{name or 'tensor'}' has a partition dim of {P}",
                             rule="err_num_partition_exceed_arch_limit", limit=pmax, value=P,
                             where=_where())
    tile_dims = shp[pdim:]
    if len(tile_dims) < 2:
        raise ShapeError(f"on-chip tensors need at least 2 dims (partition + free), got {shp}",
                         rule="onchip-rank", limit=">= 2", value=shp, where=_where(),
                         hint="use (P, 1) instead of (P,)")
    sd = dt.storage_dtype(d, ctx.options.precise_fp)
    isz = sd.itemsize
    free_bytes = isz
    for s in tile_dims[1:]:
        free_bytes *= s
    blocks = shp[:pdim]
    nblocks = 1
    for b in blocks:
        nblocks *= b
    spec = ctx.spec
    if memory == "psum":
        lim = max(spec.psum.bank_bytes, spec.tensor.max_moving_free * 4)
        if conv.psum_tile_spans_banks:  # nki-library allocates 2+ bank tiles
            lim = spec.psum.bytes_per_partition
        if free_bytes > lim:
            raise CapacityError(f"PSUM tile '{name or 'tensor'}' needs {free_bytes} B per partition",
                                rule="psum-tile-size", limit=f"{lim} B per partition",
                                value=f"{free_bytes} B", where=_where(),
                                hint="a PSUM tile holds at most one bank (512 fp32) on gen2/gen3")
    if isinstance(alloc, (ModAlloc, CallbackAlloc, AddressAlloc)):
        alloc = _first_trace_placement(ctx, alloc)
        return _manual(ctx, alloc, shp, pdim, d, sd, free_bytes, name)
    # automatic placement: private partition-major buffer
    pstride = nblocks * free_bytes
    st = ctx.new_storage(memory, memory, name or None, P * pstride, sd, P, pstride, account=False,
                         loc=loc, fill=poison)
    st.row_bytes = pstride
    if nblocks > 1 and memory == "sbuf":   # each block its own tile for capacity (memory.py)
        ctx.sbuf.blocks[st.id] = free_bytes
    ctx.charge(st)
    strides = _layout(shp, pdim, isz, pstride, free_bytes)
    return NkiTensor(st, 0, shp, strides, d, pdim, owner=st.id)


def _first_trace_placement(ctx: KernelContext, alloc):
    """Legacy loops are traced once: an allocation on a later iteration of an affine/sequential
    loop takes the placement the same call stack got on the first iteration."""
    if not ctx.conventions.loops_traced_once or not ctx.loops:
        return alloc
    import sys
    from ...source import is_internal
    f = sys._getframe(2)
    stack = []
    while f is not None:
        if not is_internal(f.f_code):
            stack.append((f.f_code, f.f_lineno))
        f = f.f_back
    key = tuple(stack)
    later = any(k > 0 and once for k, once in ctx.loops)
    if later and key in ctx.placements:
        return ctx.placements[key]
    ctx.placements[key] = alloc
    return alloc


def _layout(shp, pdim, isz, pstride, free_bytes):
    free_strides = []
    acc = isz
    for s in reversed(shp[pdim + 1:]):
        free_strides.append(acc)
        acc *= s
    free_strides = list(reversed(free_strides))
    block_strides = []
    acc = free_bytes
    for s in reversed(shp[:pdim]):
        block_strides.append(acc)
        acc *= s
    return tuple(reversed(block_strides)) + (pstride,) + tuple(free_strides)


def _resolve_buffer(buffer, buffer_names: bool, address):
    if address is not None:
        mem = buffer.name if isinstance(buffer, Buffer) else (buffer or "sbuf")
        return AddressAlloc(mem if isinstance(mem, str) else "sbuf", address)
    if buffer is None:
        return AutoAlloc("sbuf")
    if isinstance(buffer, Buffer):
        return AutoAlloc(buffer.name)
    if isinstance(buffer, (ModAlloc, CallbackAlloc, AutoAlloc)):
        return buffer
    if isinstance(buffer, str):
        if not buffer_names:
            raise KernelError("buffer names must be nl.sbuf / nl.psum / nl.hbm / nl.shared_hbm "
                              "objects, not strings", rule="buffer-type", value=buffer,
                              where=_where())
        if buffer in BUFFERS:
            return AutoAlloc(buffer)
    raise KernelError(f"unknown buffer {buffer!r}", rule="buffer-type", limit=sorted(BUFFERS),
                      value=repr(buffer), where=_where())


def _hbm(ctx: KernelContext, shape, d, kind: str, name: str, block_dims: bool) -> NkiTensor:
    lock = getattr(ctx, "shared_lock", None) if kind == "shared_hbm" else None
    if lock is None:
        return _hbm_alloc(ctx, shape, d, kind, name, block_dims)
    with lock:  # LNC cores run as threads: both must get the same shared_hbm tensor
        return _hbm_alloc(ctx, shape, d, kind, name, block_dims)


def _hbm_alloc(ctx: KernelContext, shape, d, kind: str, name: str, block_dims: bool) -> NkiTensor:
    shp, _ = parse_shape(shape, block_dims, False)
    sd = dt.storage_dtype(d, ctx.options.precise_fp)
    if kind == "shared_hbm":
        if ctx.depth > 0:
            raise KernelError(f"shared_hbm tensor '{name or 'tensor'}' allocated inside a sub-kernel; "
                              "shared_hbm tensors can only be allocated at the top level of a kernel",
                              rule="err_shared_hbm_must_in_kernel_level",
                              limit="top-level kernel scope", value=f"sub-kernel depth {ctx.depth}",
                              where=_where())
        key = ("shared_hbm", ctx.shared_hbm_seq)
        ctx.shared_hbm_seq += 1
        got = ctx.shared.get(key)
        if got is not None and got.shape == shp and got.dtype == d:
            return got
    n = 1
    for s in shp:
        n *= s
    ctx.check_hbm(n * sd.itemsize, name or "tensor")  # before the host buffer is allocated
    st = ctx.new_storage("hbm", kind, name or None, n * sd.itemsize, sd, 1, 0, account=False)
    st.hbm_pitch = (shp[-1] if shp else 1) * sd.itemsize
    ctx.charge(st)
    strides = []
    acc = sd.itemsize
    for s in reversed(shp):
        strides.append(acc)
        acc *= s
    t = NkiTensor(st, 0, shp, tuple(reversed(strides)), d, None, owner=st.id)
    if kind == "shared_hbm":
        st.is_output = True
        ctx.shared[key] = t
    return t


def _manual(ctx: KernelContext, alloc, shp, pdim, d, sd, free_bytes, name) -> NkiTensor:
    memory = alloc.memory
    mm = ctx.manual(memory)
    spec_mem = ctx.spec.sbuf if memory == "sbuf" else ctx.spec.psum
    pstride = spec_mem.bytes_per_partition
    P = shp[pdim]
    blocks = shp[:pdim]
    name = name or f"t{next(ctx.name_counter)}"

    def fail(msg, limit, value):
        raise CapacityError(f"manual allocation of '{name}': {msg}", rule=f"{memory}-address",
                            limit=limit, value=value, where=_where())

    if isinstance(alloc, ModAlloc):
        if alloc.num_par_tiles:
            raise UnsupportedError("mod_alloc num_par_tiles (partition-wise tiling) is not modelled",
                                   rule="mod-alloc-par-tiles", value=alloc.num_par_tiles,
                                   where=_where())
        nt = list(alloc.num_tiles) + list(blocks[len(alloc.num_tiles):])
        if len(nt) > len(blocks):
            if all(n == 1 for n in nt[len(blocks):]):
                nt = nt[:len(blocks)]
            else:
                raise KernelError(f"mod_alloc names {len(alloc.num_tiles)} tile counts for "
                                  f"{len(blocks)} block dims", rule="mod-alloc-tiles",
                                  value=alloc.num_tiles, where=_where())
        nphys = 1
        for n in nt:
            nphys *= n
        p0 = alloc.base_partition
        if memory == "psum":
            bank_bytes = ctx.spec.psum.bank_bytes
            if free_bytes > bank_bytes and nphys > 1:
                fail("each block must fit one PSUM bank", f"{bank_bytes} B", f"{free_bytes} B")
            last_bank = alloc.base_bank + nphys - 1
            if last_bank >= ctx.spec.psum.banks:
                fail(f"uses banks {alloc.base_bank}..{last_bank}", f"{ctx.spec.psum.banks} banks",
                     last_bank + 1)

            def addr(idx, _nt=tuple(nt)):
                phys = _linear(idx, _nt)
                return (alloc.base_bank + phys) * bank_bytes + alloc.base_addr
        else:
            def addr(idx, _nt=tuple(nt)):
                return alloc.base_addr + _linear(idx, _nt) * free_bytes
        tiles = [addr(i) for i in np.ndindex(*nt)] if nt else [addr(())]
        span_end = max(tiles) + free_bytes
    elif isinstance(alloc, CallbackAlloc):
        def resolve(idx):
            r = alloc.fn(idx=tuple(idx), pdim_size=P, fdim_size=free_bytes)
            r = tuple(int(x) for x in r)
            if memory == "psum":
                if len(r) != 3:
                    raise KernelError("psum.alloc callbacks return (bank, partition, offset)",
                                      rule="alloc-callback", value=r, where=_where())
                bank, p, off = r
                if not 0 <= bank < ctx.spec.psum.banks:
                    fail(f"bank {bank}", f"0..{ctx.spec.psum.banks - 1}", bank)
                return p, bank * ctx.spec.psum.bank_bytes + off
            if len(r) != 2:
                raise KernelError("sbuf.alloc callbacks return (partition, address)",
                                  rule="alloc-callback", value=r, where=_where())
            return r[0], r[1]
        places = {idx: resolve(idx) for idx in np.ndindex(*blocks)} if blocks else {(): resolve(())}
        tiles = [a for _, a in places.values()]
        span_end = max(tiles) + free_bytes
        p0 = min(p for p, _ in places.values())

        def addr(idx, _pl=places):
            p, a = _pl[tuple(idx)]
            return a + (p - p0) * pstride
    else:  # AddressAlloc
        if len(alloc.address) != 2:
            raise KernelError("address= takes (partition_offset, byte_offset)", rule="address",
                              value=alloc.address, where=_where())
        p0, a0 = int(alloc.address[0]), int(alloc.address[1])
        if memory == "psum" and a0 % ctx.spec.psum.bank_bytes:
            raise KernelError("PSUM tensors must start on a bank boundary", rule="psum-bank-align",
                              limit=f"multiple of {ctx.spec.psum.bank_bytes}", value=a0,
                              where=_where())
        nblocks = int(np.prod(blocks)) if blocks else 1

        def addr(idx, _b=tuple(blocks)):
            return a0 + (_linear(idx, _b) if _b else 0) * free_bytes
        tiles = [a0 + i * free_bytes for i in range(nblocks)]
        span_end = a0 + nblocks * free_bytes
    if span_end > pstride:
        fail(f"ends at byte {span_end} of a partition", f"{pstride} B per partition", span_end)
    if p0 + P > spec_mem.partitions or p0 < 0:
        fail(f"partitions {p0}..{p0 + P - 1}", f"{spec_mem.partitions} partitions", p0 + P)
    base_off = p0 * pstride
    st = Storage(memory=memory, kind=memory, name=name, nbytes=P * pstride, sdtype=sd,
                 partitions=P, pstride=pstride, loc=user_loc(), data=mm.data, init=mm.init,
                 region_id=mm.region_id)
    st.base_off = base_off + min(tiles)
    st.row_bytes = span_end - min(tiles)
    ctx.accountant(memory).charge_manual(st, p0, P, span_end)
    # a new allocation's bytes hold no defined values (and belong to no tensor) yet
    for a in set(tiles):
        for p in range(p0, p0 + P):
            o = p * pstride + a
            mm.init[o:o + free_bytes] = 0
            mm.owner[o:o + free_bytes] = 0
    free_strides = []
    acc = sd.itemsize
    for s in reversed(shp[pdim + 1:]):
        free_strides.append(acc)
        acc *= s
    tile_strides = (pstride,) + tuple(reversed(free_strides))
    if not blocks:
        return NkiTensor(st, base_off + addr(()), shp, tile_strides, d, 0, owner=st.id, name=name)
    bm = BlockMap(tuple(blocks), lambda idx, _a=addr: base_off + _a(idx))
    return NkiTensor(st, base_off, shp, (0,) * len(blocks) + tile_strides, d, pdim, blocks=bm,
                     owner=st.id, name=name)


def _linear(idx, counts) -> int:
    lin = 0
    for i, n in zip(idx, counts):
        lin = lin * n + (int(i) % n)
    return lin


def shared_constant(constant, dtype=None) -> NkiTensor:
    """A constant HBM tensor baked into the kernel (an array or the path of a .npy file)."""
    ctx = current()
    if isinstance(constant, str):
        constant = np.load(constant)
    arr = np.asarray(constant)
    d = dt.as_dtype(dtype) if dtype is not None else dt.as_dtype(arr.dtype)
    t = _hbm(ctx, arr.shape if arr.ndim else (1,), d, "hbm", "shared_constant", True)
    if ctx.numerics:
        src = arr.astype(np.float32) if arr.dtype.kind in "fiub" and d != arr.dtype else arr
        t.array()[...] = ctx.convert(np.asarray(src).reshape(t.shape), d)
    t._st.full = True
    t._st.readonly = True
    return t
