"""Index-pattern and selection instructions: iota, affine_select, predicated copies, shuffles,
random numbers and dropout."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ...errors import IndexingError, KernelError, MemoryAccessError, ShapeError
from ..core import dtypes as dt
from ..core.alu import BINARY, token_name
from ..core.context import current
from ..core.index import IndexArray, IndexExpr, Predicate, _IndexBase
from ..core.tensor import NkiTensor
from . import base
from .base import emit, f32, legacy_mask, read, tile, where


def _pattern_values(pattern, offset, channel_multiplier, partitions: int) -> np.ndarray:
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


def iota_legacy(expr, dtype, *, mask=None):
    """Legacy ``nisa.iota(expr, dtype)``: the values of an affine index expression, on GpSimd."""
    ctx = current()
    if isinstance(expr, (int, np.integer)):
        expr = IndexExpr(int(expr), (0, 0), (1, 1))
    if not isinstance(expr, _IndexBase):
        raise KernelError("iota takes an index expression built from nl.arange / nl.mgrid",
                          rule="iota-expr", value=type(expr).__name__, where=where())
    shape = tuple(expr.shape)
    if len(shape) < 2:
        raise IndexingError("iota expressions must be at least 2-D (lift aranges with [:, None])",
                            rule="err_1d_arange_not_supported", limit=">= 2-D index expressions",
                            value=f"{len(shape)}-D expression of shape {shape}", where=where())
    od = dt.as_dtype(dtype)
    vals = np.ascontiguousarray(expr.dense()) if ctx.numerics else None
    return emit(ctx, dst=None, values=vals, init=None, out_shape=shape, out_dtype=od,
                mask=legacy_mask(mask, shape), engine="gpsimd", opcode="iota", reads=[],
                dtype_in="int32")


def iota_new(dst, pattern, offset=0, channel_multiplier=0):
    ctx = current()
    d = base.need_tensor(dst, "dst", "iota")
    if d._st.memory != "sbuf":
        raise MemoryAccessError("iota writes SBUF", rule="iota-dst-sbuf", limit="sbuf",
                                value=d._st.memory, where=where())
    v = _pattern_values(pattern, offset, channel_multiplier, d.shape[0])
    if v.size != d.size:
        raise ShapeError(f"iota pattern makes {v.size // d.shape[0]} elements per partition, dst "
                         f"has {d.size // d.shape[0]}", rule="iota-pattern-size",
                         limit=d.size // d.shape[0], value=v.size // d.shape[0], where=where())
    return emit(ctx, dst=d, values=v.reshape(d.shape) if ctx.numerics else None, init=None,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="gpsimd", opcode="iota",
                reads=[], dtype_in="int32")


def affine_select_legacy(pred, on_true_tile, on_false_value, *, dtype=None, mask=None):
    """Legacy ``nisa.affine_select(pred, tile, value)``: keep the tile where the affine predicate
    over the tile's index space holds, else the scalar."""
    ctx = current()
    t = tile(ctx, on_true_tile, "on_true_tile", "affine_select", "gpsimd")
    shape = t.shape
    if isinstance(pred, Predicate):
        pv = pred.values()
        from ..core.index import _align
        pm = _align(pv, shape)
        pv = np.ones(shape, bool) if pm is None else (np.zeros(shape, bool) if pm is False else pm)
    elif isinstance(pred, (bool, np.bool_)):
        pv = np.full(shape, bool(pred))
    else:
        raise KernelError("affine_select pred must be a comparison of index expressions",
                          rule="affine-select-pred", value=type(pred).__name__, where=where())
    return _select_core(ctx, None, t, pv, on_false_value, dtype, mask)


def affine_select_new(dst, pattern, channel_multiplier, on_true_tile, on_false_value,
                      cmp_op=None, offset=0):
    ctx = current()
    t = tile(ctx, on_true_tile, "on_true_tile", "affine_select", "gpsimd")
    v = _pattern_values(pattern, offset, channel_multiplier, t.shape[0])
    if v.size != t.size:
        raise ShapeError("affine_select pattern does not cover the tile", rule="pattern-size",
                         limit=t.size, value=v.size, where=where())
    op = token_name(cmp_op, "cmp_op") if cmp_op is not None else "equal"
    pv = BINARY[op](v.astype(np.float32), np.float32(0)).reshape(t.shape) != 0
    return _select_core(ctx, dst, t, pv, on_false_value, None, None)


def _select_core(ctx, dst, t, pv, on_false_value, dtype, mask):
    shape = t.shape
    m = legacy_mask(mask, shape)
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
    m = cond if mask is None else (cond & legacy_mask(mask, d.shape))
    return emit(ctx, dst=d, values=sv if ctx.numerics else None,
                init=None if sinit is None else sinit.reshape(d.shape), out_shape=d.shape,
                out_dtype=d.dtype, mask=m, engine="vector", opcode="tensor_copy_predicated",
                reads=reads)


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


def rand(shape, dtype, *, dst=None):
    """Uniform [0, 1) values (``nl.rand``), seeded by ``nl.random_seed`` / TRNSIM_SEED."""
    ctx = current()
    shape = tuple(dst.shape if dst is not None else shape)
    od = dst.dtype if dst is not None else dt.as_dtype(dtype)
    vals = ctx.rng.random(shape, dtype=np.float32) if ctx.numerics else None
    return emit(ctx, dst=dst, values=vals, init=None, out_shape=shape, out_dtype=od, mask=None,
                engine="vector", opcode="rand", reads=[], dtype_in="-")


def random_seed(seed, *, mask=None) -> None:
    ctx = current()
    if mask is False:
        return
    if isinstance(seed, NkiTensor):
        v, _ = read(ctx, tile(ctx, seed, "seed", "random_seed", "vector"), "random_seed")
        seed = int(np.asarray(v).reshape(-1)[0])
    ctx.rng = np.random.default_rng(int(seed) & 0xFFFFFFFF)
    ctx.record("vector", "random_seed", [], [], 1, 1, "int32", "-")


def dropout(dst, data, prob, *, dtype=None, mask=None):
    """Zero each element with probability ``prob`` (scalar or (P, 1) tile); Vector."""
    ctx = current()
    t = tile(ctx, data, "data", "dropout", "vector")
    shape = t.shape
    m = legacy_mask(mask, shape)
    v, init = read(ctx, t, "dropout", m)
    pv, pinit, pt = base.scalar_or_column(ctx, prob, shape, "prob", "dropout", "vector")
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    vals = None
    if ctx.numerics:
        keep = ctx.rng.random(shape, dtype=np.float32) >= pv
        vals = np.where(keep, f32(v), np.float32(0))
    reads = [t] + ([pt] if pt is not None else [])
    return emit(ctx, dst=dst, values=vals, init=base.and_init(shape, init, pinit), out_shape=shape,
                out_dtype=od, mask=m, engine="vector", opcode="dropout", reads=reads)
