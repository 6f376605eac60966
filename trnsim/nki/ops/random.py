"""Random numbers: ``rand``, ``random_seed`` and ``dropout`` (seeded per kernel instance)."""
from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .base import emit, f32, op_mask, read, tile


def rand(shape, dtype, *, dst=None):
    """Uniform [0, 1) values (``nl.rand``), seeded by ``nl.random_seed`` / TRNSIM_SEED."""
    ctx = current()
    shape = tuple(dst.shape if dst is not None else shape)
    od = dst.dtype if dst is not None else dt.as_dtype(dtype)
    vals = ctx.rng.random(shape, dtype=np.float32) if ctx.numerics else None
    return emit(ctx, dst=dst, values=vals, init=None, out_shape=shape, out_dtype=od, mask=None,
                engine="vector", opcode="rand", reads=[], dtype_in="-")


def random_seed(seed, *, mask=None) -> None:
    """Reseed this kernel instance's random numbers."""
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
    m = op_mask(mask, shape)
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
