"""Index generation and gathers: ``iota``, partition shuffles, GpSimd gathers (``local_gather``,
``nc_n_gather``, ``gather_flattened``), ``nonzero_with_count`` and ``sequence_bounds``.  Semantics
follow the SDK docstrings (Neuron 2.32)."""
from __future__ import annotations

import numpy as np

from ...errors import DtypeError, KernelError, MemoryAccessError, ShapeError
from ..core import dtypes as dt, gates
from ..core.context import current
from . import base
from .base import _rows_init, _flat, emit, f32, op_mask, read, tile, where


def pattern_values(pattern, offset, channel_multiplier, partitions: int) -> np.ndarray:
    """``offset + p * channel_multiplier + sum(step_i * idx_i)`` over a <=4-D [[step, num]] pattern."""
    pattern = [list(p) for p in pattern]
    if len(pattern) > 4:
        raise KernelError("iota/affine_select patterns have at most 4 dims", rule="pattern-dims",
                          limit=4, value=len(pattern), where=where())
    nums = [int(n) for _, n in pattern]
    v = np.full([partitions] + nums, int(offset), dtype=np.int64)
    v += (np.arange(partitions, dtype=np.int64) * int(channel_multiplier)).reshape(
        [partitions] + [1] * len(nums))
    for i, (step, n) in enumerate(pattern):
        shape = [1] * (len(nums) + 1)
        shape[i + 1] = int(n)
        v += (np.arange(int(n), dtype=np.int64) * int(step)).reshape(shape)
    return v


def iota(dst, values: np.ndarray, dtype=None, *, mask=None):
    """``iota`` on GpSimd: write the integer index ``values`` the front end computed (an affine
    expression or an access pattern) into ``dst`` (SBUF, as many elements) or, with ``dst`` None,
    into a fresh tile of ``dtype`` shaped like ``values``."""
    ctx = current()
    if dst is None:
        shape = tuple(values.shape)
        vals = np.ascontiguousarray(values) if ctx.numerics else None
        return emit(ctx, dst=None, values=vals, init=None, out_shape=shape,
                    out_dtype=dt.as_dtype(dtype), mask=op_mask(mask, shape), engine="gpsimd",
                    opcode="iota", reads=[], dtype_in="int32")
    d = base.need_tensor(dst, "dst", "iota")
    if d._st.memory != "sbuf":
        raise MemoryAccessError("iota writes SBUF", rule="iota-dst-sbuf", limit="sbuf",
                                value=d._st.memory, where=where())
    if values.size != d.size:
        raise ShapeError(f"iota pattern makes {values.size // d.shape[0]} elements per partition, "
                         f"dst has {d.size // d.shape[0]}", rule="iota-pattern-size",
                         limit=d.size // d.shape[0], value=values.size // d.shape[0],
                         where=where())
    return emit(ctx, dst=d, values=values.reshape(d.shape) if ctx.numerics else None, init=None,
                out_shape=d.shape, out_dtype=d.dtype, mask=op_mask(mask, d.shape), engine="gpsimd",
                opcode="iota", reads=[], dtype_in="int32")


def stream_shuffle(dst, src, shuffle_mask):
    """Move partitions within each 32-partition quadrant: out[i] = in[mask[i]] (255 = keep)."""
    ctx = current()
    s = tile(ctx, src, "src", "nc_stream_shuffle", "vector")
    d = base.need_tensor(dst, "dst", "nc_stream_shuffle")
    sm = [int(x) for x in shuffle_mask]
    if len(sm) != 32:
        raise KernelError("nc_stream_shuffle needs a 32-entry shuffle_mask", rule="shuffle-mask",
                          limit=32, value=len(sm), where=where())
    if s.dtype != d.dtype or s.size // s.shape[0] != d.size // d.shape[0]:
        raise ShapeError("nc_stream_shuffle: src and dst need equal dtype and elements per partition",
                         rule="shuffle-shape", where=where())
    v, init = read(ctx, s, "nc_stream_shuffle")
    P = d.shape[0]
    free = d.size // P
    src2 = v.reshape(s.shape[0], free)
    out = np.array(d.array(), copy=True).reshape(P, free) if ctx.numerics else None
    keep = np.zeros((P, 1), bool)
    for q0 in range(0, P, 32):
        for i in range(min(32, P - q0)):
            j = sm[i]
            if j == 255:
                keep[q0 + i] = True
                continue
            if ctx.numerics and q0 + j < src2.shape[0]:
                out[q0 + i] = src2[q0 + j]
    m = np.broadcast_to(~keep, (P, free)).reshape(d.shape)
    return emit(ctx, dst=d, values=out.reshape(d.shape) if out is not None else None, init=None,
                out_shape=d.shape, out_dtype=d.dtype, mask=None if m.all() else m, engine="vector",
                opcode="nc_stream_shuffle", reads=[s])


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None):
    """GpSimd gather inside each group of 16 partitions: the group's ``index`` values, flattened
    partition-first (column-major), are element offsets into each partition's flattened free
    dims;"""
    # ``num_elem_per_idx`` contiguous elements are read per index (numpy semantics of the SDK's
    # local_gather example).
    ctx = current()
    op = "local_gather"
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, src_buffer, "src_buffer", op, "gpsimd", memories=("sbuf",))
    ix = tile(ctx, index, "index", op, "gpsimd", memories=("sbuf",))
    P = s.shape[0]
    if ix.shape[0] != P or P % 16:
        raise ShapeError(f"{op}: src_buffer and index need the same partition count, a multiple "
                         "of 16", rule="local-gather-partitions", limit="equal, multiple of 16",
                         value=(P, ix.shape[0]), where=where())
    if ix.dtype not in (dt.uint16, dt.uint32, dt.int32, dt.int16):
        raise DtypeError(f"{op}: index must be uint16", rule="index-dtype", limit="uint16",
                         value=dt.name(ix.dtype), where=where())
    e = int(num_elem_per_idx)
    if e not in (1, 2, 4, 8, 16, 32):
        raise KernelError(f"{op}: num_elem_per_idx must be 1, 2, 4, 8, 16 or 32",
                          rule="local-gather-elems", limit=(1, 2, 4, 8, 16, 32), value=e,
                          where=where())
    per_core = ix.size // (P // 16)
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < nv <= per_core or nv > 4096:
        raise KernelError(f"{op}: num_valid_indices {nv} exceeds the {per_core} indices per core",
                          rule="local-gather-valid", limit=min(per_core, 4096), value=nv,
                          where=where())
    if s.dtype != d.dtype:
        raise DtypeError(f"{op}: no dtype conversion (src_buffer {dt.name(s.dtype)}, dst "
                         f"{dt.name(d.dtype)})", rule="gather-dtype", limit=dt.name(s.dtype),
                         value=dt.name(d.dtype), where=where())
    if d.shape[0] != P or _flat(d) != nv * e:
        raise ShapeError(f"{op}: dst needs {nv * e} elements per partition", rule="dst-shape",
                         limit=(P, nv * e), value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    iv, iinit = read(ctx, ix, op)
    F = _flat(s)
    src2 = np.asarray(sv).reshape(P, F)
    idx2 = np.asarray(iv).reshape(P, -1).astype(np.int64)
    out = np.zeros((P, nv * e), dtype=src2.dtype)
    oinit = None if sinit is None else np.ones((P, nv * e), bool)
    for c in range(P // 16):
        rows = slice(16 * c, 16 * c + 16)
        offs = idx2[rows].flatten(order="F")[:nv]
        cols = (offs[:, None] + np.arange(e)[None, :]).reshape(-1)
        if (cols < 0).any() or (cols >= F).any():
            bad = int(cols[(cols < 0) | (cols >= F)][0])
            raise KernelError(f"{op}: index {bad} is outside the {F} elements of a partition",
                              rule="err_tensor_access_out_of_bound", limit=f"0..{F - 1}",
                              value=bad, where=where())
        out[rows] = src2[rows][:, cols]
        if sinit is not None:
            oinit[rows] = np.asarray(sinit).reshape(P, F)[rows][:, cols] != 0
    init = base.and_init((P, nv * e), oinit, _rows_init(P, nv * e, iinit))
    return emit(ctx, dst=d, values=out.reshape(d.shape) if ctx.numerics else None, init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="gpsimd", opcode=op,
                reads=[s, ix], free=nv * e)


def nc_n_gather(dst, data, indices):
    """Per partition, ``dst[p, j] = data[p].flat[indices[p, j]]`` (GpSimd, SBUF only; uint32
    indices; ``dst`` None returns a new tile)."""
    return _n_gather(dst, data, indices, "nc_n_gather", 1)


def gather_flattened(data, indices, axis=0):
    """``nl.gather_flattened``: a new tile with ``out[p, b..., j...] = data[p, b..., :].flat[
    indices[p, b..., j...]]``."""
    # ``axis`` counts the *free* dims of ``data`` (the gather never crosses partitions, and the
    # documented default ``axis=0`` is the all-free-dims flattened gather): the free dims from
    # ``axis`` on are flattened and indexed, the free dims before it are batch dims that ``indices``
    # must share. Negative values count from the last dim, as in numpy, so ``axis=-1`` is
    # ``np.take_along_axis(data, indices, axis=-1)``.
    op = "gather_flattened"
    d = base.need_tensor(data, "data", op)
    ix = base.need_tensor(indices, "indices", op)
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise KernelError(f"{op}: axis must be an integer", rule="gather-axis",
                          value=repr(axis), where=where())
    nfree = d.ndim - 1
    ax = int(axis)
    if not -nfree <= ax < nfree:
        raise ShapeError(f"{op}: axis {ax} is not a free axis of data {d.shape} (free axes count "
                         "from 0 after the partition dim; negative axes from the end; the gather "
                         "never crosses partitions)", rule="gather-axis",
                         limit=f"{-nfree}..{nfree - 1}", value=ax, where=where())
    first = ax + 1 if ax >= 0 else d.ndim + ax  # data dim where the flattened (gathered) dims start
    if first > 1 and (ix.ndim < first or tuple(ix.shape[1:first]) != tuple(d.shape[1:first])):
        raise ShapeError(f"{op}: with axis={ax}, indices {ix.shape} must share data's batch dims "
                         f"{tuple(d.shape[1:first])} after the partition dim",
                         rule="gather-batch-shape", limit=tuple(d.shape[:first]),
                         value=tuple(ix.shape), where=where())
    return _n_gather(None, d, ix, op, first)


def _n_gather(dst, data, indices, op: str, first: int):
    """The GpSimd gather: rows are (partition, batch dims ``data.shape[1:first]``), each row
    indexed over the flattened dims ``data.shape[first:]``."""
    ctx = current()
    s = tile(ctx, data, "data", op, "gpsimd", memories=("sbuf",))
    ix = tile(ctx, indices, "indices", op, "gpsimd", memories=("sbuf",))
    base.same_partitions(s, ix, op, "data", "indices")
    if not dt.is_int(ix.dtype):
        raise DtypeError(f"{op}: indices must be uint32", rule="index-dtype", limit="uint32",
                         value=dt.name(ix.dtype), where=where())
    P = s.shape[0]
    B = int(np.prod(s.shape[1:first], dtype=np.int64))  # batch rows per partition
    F = _flat(s) // B
    n = _flat(ix) // B  # indices per row
    rows = P * B
    if dst is not None:
        d = base.need_tensor(dst, "dst", op)
        if d.dtype != s.dtype:
            raise DtypeError(f"{op}: dst must have data's dtype", rule="gather-dtype",
                             limit=dt.name(s.dtype), value=dt.name(d.dtype), where=where())
        if d.shape[0] != P or _flat(d) != B * n:
            raise ShapeError(f"{op}: dst needs {B * n} elements per partition (one per index)",
                             rule="dst-shape", limit=(P, B * n), value=d.shape, where=where())
        out_shape = d.shape
    else:
        d = None
        out_shape = ix.shape
    sv, sinit = read(ctx, s, op)
    iv, iinit = read(ctx, ix, op)
    idx = np.asarray(iv).reshape(rows, n).astype(np.int64)
    bad = (idx < 0) | (idx >= F)
    if iinit is not None:
        bad &= np.asarray(iinit).reshape(rows, n) != 0
    if bad.any():
        b = int(idx[bad][0])
        unit = "a partition" if B == 1 else "a row (partition and batch dims)"
        raise KernelError(f"{op}: index {b} is outside the {F} elements of {unit}",
                          rule="err_tensor_access_out_of_bound", limit=f"0..{F - 1}", value=b,
                          where=where())
    idx = np.clip(idx, 0, F - 1)
    vals = np.take_along_axis(np.asarray(sv).reshape(rows, F), idx, axis=1) if ctx.numerics \
        else None
    init = None
    if sinit is not None or iinit is not None:
        g = np.ones((rows, n), bool) if sinit is None else \
            np.take_along_axis(np.asarray(sinit).reshape(rows, F) != 0, idx, axis=1)
        init = base.and_init((rows, n), g,
                             None if iinit is None else np.asarray(iinit).reshape(rows, n))
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(out_shape),
                init=None if init is None else init.reshape(out_shape), out_shape=out_shape,
                out_dtype=s.dtype, mask=None, engine="gpsimd", opcode="nc_n_gather",
                reads=[s, ix], free=B * n)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1):
    """On partitions 0, 16, ..., 112 only: the positions of nonzero elements (+ ``index_offset``),
    then ``padding_val``, then the count in the extra last element (gen3+, SBUF, int32 dst)."""
    ctx = current()
    op = "nonzero_with_count"
    gates.require(ctx, op)
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, src, "src", op, "gpsimd", memories=("sbuf",))
    if d._st.memory != "sbuf":
        raise KernelError(f"{op}: dst must be in SBUF", rule="nonzero-memory", limit="sbuf",
                          value=d._st.memory, where=where())
    if s.dtype not in (dt.float32, dt.int32):
        raise DtypeError(f"{op}: src must be float32 or int32", rule="nonzero-dtype",
                         limit="float32/int32", value=dt.name(s.dtype), where=where())
    if d.dtype != dt.int32:
        raise DtypeError(f"{op}: dst must be int32", rule="nonzero-dtype", limit="int32",
                         value=dt.name(d.dtype), where=where())
    P, T = s.shape[0], _flat(s)
    if d.shape[0] != P or _flat(d) != T + 1:
        raise ShapeError(f"{op}: dst needs {P} partitions and {T + 1} elements per partition",
                         rule="dst-shape", limit=(P, T + 1), value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    x = f32(sv).reshape(P, T) if s.dtype == dt.float32 else np.asarray(sv).reshape(P, T)
    rows = list(range(0, P, 16))
    out = np.zeros((P, T + 1), dtype=np.int64)
    mask = np.zeros((P, T + 1), bool)
    for p in rows:
        nz = np.flatnonzero(x[p] != 0)
        out[p, :] = int(padding_val)
        out[p, :nz.size] = nz + int(index_offset)
        out[p, T] = nz.size
        mask[p] = True
    init = None
    if sinit is not None:
        ok = np.asarray(sinit).reshape(P, T).all(axis=1)
        init = np.repeat(ok[:, None], T + 1, axis=1)
    return emit(ctx, dst=d, values=out.reshape(d.shape) if ctx.numerics else None,
                init=None if init is None else init.reshape(d.shape), out_shape=d.shape,
                out_dtype=d.dtype, mask=mask.reshape(d.shape), engine="gpsimd", opcode=op,
                reads=[s], partitions=len(rows), free=T)


def sequence_bounds(dst, segment_ids):
    """For segment ids (1, n) (0 = padding), each element's [start, end) segment bounds as a
    (1, 2, n) tile: row 0 starts (n for padding), row 1 ends (-1 for padding); GpSimd."""
    ctx = current()
    op = "sequence_bounds"
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, segment_ids, "segment_ids", op, "gpsimd", memories=("sbuf",))
    for t, role in ((s, "segment_ids"), (d, "dst")):
        if t.dtype not in (dt.float32, dt.int32):
            raise DtypeError(f"{op}: {role} must be float32 or int32", rule="sequence-bounds-dtype",
                             limit="float32/int32", value=dt.name(t.dtype), where=where())
    if s.shape[0] != 1:
        raise ShapeError(f"{op}: the partition dim must be 1", rule="sequence-bounds-partitions",
                         limit=1, value=s.shape[0], where=where())
    n = _flat(s)
    if d.shape[0] != 1 or _flat(d) != 2 * n:
        raise ShapeError(f"{op}: dst must be (1, 2, {n})", rule="dst-shape", limit=(1, 2, n),
                         value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    seq = f32(sv).reshape(-1)
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    for i in range(n):
        if seq[i] == 0:
            lo[i] = n
        elif i > 0 and seq[i] == seq[i - 1]:
            lo[i] = lo[i - 1]
        else:
            lo[i] = i
    for i in range(n - 1, -1, -1):
        if seq[i] == 0:
            hi[i] = -1
        elif i < n - 1 and seq[i] == seq[i + 1]:
            hi[i] = hi[i + 1]
        else:
            hi[i] = i + 1
    vals = np.stack([lo, hi]).reshape(d.shape) if ctx.numerics else None
    init = None if sinit is None else np.repeat(np.asarray(sinit).reshape(1, 1, n) != 0, 2,
                                                axis=1).reshape(d.shape)
    return emit(ctx, dst=d, values=vals, init=init, out_shape=d.shape, out_dtype=d.dtype,
                mask=None, engine="gpsimd", opcode=op, reads=[s], free=n)
