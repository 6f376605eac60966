"""Top-8 instructions of the Vector engine: ``max8``, ``nc_find_index8``, ``nc_match_replace8``."""
from __future__ import annotations

import numpy as np

from ...errors import DtypeError, ShapeError
from ..core import dtypes as dt
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .base import _rows_init, _flat, _same_layout, emit, f32, read, tile, where


def max8(dst, src, *, dtype=None, mask=None):
    """The 8 largest values per partition, descending (Vector)."""
    ctx = current()
    t = tile(ctx, src, "src", "max8", "vector")
    free = t.size // t.shape[0]
    lo, hi = ctx.spec.access.max8_min, ctx.spec.access.max8_max
    if not lo <= free <= hi:
        raise ShapeError(f"max8 reads {free} elements per partition", rule="max8-size",
                         limit=f"{lo}..{hi}", value=free, where=where())
    v, init = read(ctx, t, "max8")
    out_shape = (t.shape[0], 8)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        x = f32(v).reshape(t.shape[0], -1)
        vals = -np.sort(-x, axis=1)[:, :8]
    rinit = None if init is None else np.repeat(init.reshape(t.shape[0], -1).all(axis=1,
                                                keepdims=True), 8, axis=1)
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od, mask=None,
                engine="vector", opcode="max8", reads=[t], free=free)


def _eight(ctx, op, data, vals):
    d = tile(ctx, data, "data", op, "vector")
    v = tile(ctx, vals, "vals", op, "vector")
    base.same_partitions(d, v, op, "data", "vals")
    n = _flat(d)
    if not 8 <= n <= 16384:
        raise ShapeError(f"{op}: data has {n} elements per partition", rule=f"{op}-size",
                         limit="8..16384", value=n, where=where())
    if _flat(v) != 8:
        raise ShapeError(f"{op}: vals must hold 8 values per partition", rule=f"{op}-vals",
                         limit=8, value=_flat(v), where=where())
    dv, di = read(ctx, d, op)
    vv, vi = read(ctx, v, op)
    P = d.shape[0]
    return d, v, f32(dv).reshape(P, n), f32(vv).reshape(P, 8), di, vi


def _index_dtype_check(t: NkiTensor, op: str, role: str) -> None:
    if t.dtype not in (dt.uint16, dt.uint32, dt.int32, dt.int16):
        raise DtypeError(f"{op}: {role} holds indices and must be uint16 or uint32",
                         rule="index-dtype", limit="uint16/uint32", value=dt.name(t.dtype),
                         where=where())


def _sentinel(d: np.dtype) -> int:
    return 0xFFFF if d.itemsize == 2 else 0xFFFFFFFF


def nc_find_index8(dst, data, vals):
    """Per partition, the index of the first occurrence of each of the 8 ``vals`` in ``data``
    (duplicate vals take successive occurrences in ascending order); a value not present gives
    the all-ones sentinel (0xFFFFFFFF for uint32, 0xFFFF for uint16)."""
    ctx = current()
    op = "nc_find_index8"
    out = base.need_tensor(dst, "dst", op)
    _index_dtype_check(out, op, "dst")
    d, v, x, vals8, di, vi = _eight(ctx, op, data, vals)
    P = d.shape[0]
    if out.shape[0] != P or _flat(out) != 8:
        raise ShapeError(f"{op}: dst must be ({P}, 8)", rule="dst-shape", limit=(P, 8),
                         value=out.shape, where=where())
    res = None
    if ctx.numerics:
        res = np.full((P, 8), _sentinel(out.dtype), dtype=np.int64)
        for p in range(P):
            used = np.zeros(x.shape[1], bool)
            for j in range(8):
                hits = np.flatnonzero((x[p] == vals8[p, j]) & ~used)
                if hits.size:
                    res[p, j] = hits[0]
                    used[hits[0]] = True
    init = _rows_init(P, 8, di, vi)
    return emit(ctx, dst=out, values=None if res is None else res.reshape(out.shape), init=init,
                out_shape=out.shape, out_dtype=out.dtype, mask=None, engine="vector", opcode=op,
                reads=[d, v], free=x.shape[1])


def nc_match_replace8(dst, data, vals, imm, dst_idx=None):
    """``dst`` = ``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``;
    vals are processed from the last to the first, so duplicate vals pair the first matching
    position with the highest slot.  The matched positions go to ``dst_idx`` when given."""
    ctx = current()
    op = "nc_match_replace8"
    out = base.need_tensor(dst, "dst", op)
    d, v, x, vals8, di, vi = _eight(ctx, op, data, vals)
    _same_layout(d, out, op, "data", "dst")
    P, n = x.shape
    res = idx = None
    if ctx.numerics:
        res = x.copy()
        idx = np.full((P, 8), -1, dtype=np.int64)
        for p in range(P):
            replaced = np.zeros(n, bool)
            for j in range(7, -1, -1):
                hits = np.flatnonzero((x[p] == vals8[p, j]) & ~replaced)
                if hits.size:
                    replaced[hits[0]] = True
                    idx[p, j] = hits[0]
            res[p, replaced] = np.float32(imm)
    extra = []
    if dst_idx is not None:
        di_t = base.need_tensor(dst_idx, "dst_idx", op)
        _index_dtype_check(di_t, op, "dst_idx")
        base.check_writable(ctx, di_t, op)
        if di_t.shape[0] != P or _flat(di_t) != 8:
            raise ShapeError(f"{op}: dst_idx must be ({P}, 8)", rule="dst-shape", limit=(P, 8),
                             value=di_t.shape, where=where())
        if idx is not None:
            idx = np.where(idx < 0, _sentinel(di_t.dtype), idx)
        base.write(ctx, di_t, None if idx is None else idx.reshape(di_t.shape),
                   _rows_init(P, 8, di, vi) if (di is not None or vi is not None) else None)
        extra.append(di_t)
    init = base.and_init((P, n), None if di is None else di.reshape(P, n),
                         None if vi is None else np.repeat(vi.reshape(P, -1).all(axis=1)[:, None],
                                                           n, axis=1))
    return emit(ctx, dst=out, values=None if res is None else res.reshape(out.shape), init=init,
                out_shape=out.shape, out_dtype=out.dtype, mask=None, engine="vector", opcode=op,
                reads=[d, v], extra_writes=extra, free=n)
