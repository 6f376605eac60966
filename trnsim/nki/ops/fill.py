"""``nl.zeros`` / ``nl.ones`` / ``nl.full``: an allocation and the memset (or free PSUM zeroing)
that initializes it."""
from __future__ import annotations

import numpy as np

from ..core import dtypes as dt
from ..core.alloc import ndarray
from ..core.context import current, fresh_region, region
from ..core.conventions import Conventions
from ..core.tensor import NkiTensor
from .elementwise import memset


def filled(shape, dtype, buffer, name: str, value, *, conv: Conventions) -> NkiTensor:
    """``nl.zeros`` / ``nl.ones`` / ``nl.full`` under the conventions ``conv``: the fill writes
    every byte, so the allocation skips the NaN poison."""
    t = ndarray(shape, dtype, buffer, name, conv=conv, poison=False)
    fill(t, value)
    return t


def fill(t: NkiTensor, value) -> None:
    """Initialize a freshly allocated tensor (``nl.zeros``/``nl.full``) with a memset."""
    ctx = current()
    if t._st.memory == "hbm":
        if ctx.numerics:
            t.array()[...] = ctx.convert(np.full(t.shape, value, np.float32), t.dtype)
            t._st.fp32_dirty()
        t._st.full = True
        ctx.record("dma", "memset", [], [region(t)], 1, t.size, "-", dt.name(t.dtype))
        return
    if t._st.memory == "psum" and value == 0 and t._blocks is None:
        # a zeroed PSUM accumulator costs nothing when a matmul writes it first (the compiler
        # sets the matmul's start-accumulation flag instead); otherwise the memset is traced
        # just before the first other access (context.py, pending_zero)
        flat = _flat_view(t)
        if not t._st.manual:  # the whole automatic allocation: a fresh tile's region
            flat._region = fresh_region(t._st, flat.shape, t.dtype)
        if ctx.numerics:
            flat.array()[...] = 0
            t._st.fp32_dirty()
        t._st.full = True
        ctx.pending_zero[t._st.region_id] = (region(flat), dt.name(t.dtype), flat.shape)
        return
    if t._blocks is not None:
        for idx in np.ndindex(*t._blocks.block_shape):
            memset(ctx, None, value, t.dtype, dst=t[idx])
        return
    if t._pdim == 0:
        memset(ctx, None, value, t.dtype, dst=t)
        return
    # auto block tensor: one memset over the whole allocation (all blocks, all partitions)
    memset(ctx, None, value, t.dtype, dst=_flat_view(t))


def _flat_view(t: NkiTensor) -> NkiTensor:
    """The whole allocation as one (partitions, elements) tile."""
    if t._pdim == 0:
        return t
    return NkiTensor(t._st, t._off, (t.shape[t._pdim], t._st.row_bytes // t._st.sdtype.itemsize),
                     (t._st.pstride, t._st.sdtype.itemsize), t.dtype, 0, owner=t._owner)


