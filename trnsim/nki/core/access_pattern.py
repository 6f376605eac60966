"""Views built by explicit description rather than subscripts: the new-API ``.ap`` access patterns
(scalar and vector offsets, deferred out-of-range views) and einops-style ``rearrange``."""
from __future__ import annotations

import numpy as np

from ...errors import IndexingError, OutOfBoundsError, ShapeError
from .index_exprs import _is_int
from .access_kinds import Gather
from .storage import retype as _retype



def access_pattern(t: NkiTensor, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype):
    """New-API ``.ap``: a view built from explicit [step, num] pairs (outermost first) on the
    receiver's storage. ``offset`` (elements of ``dtype``) is added to the receiver view's own
    start; ``scalar_offset`` adds ``value * stride(indirect_dim)`` of the receiver;"""
    # ``vector_offset`` (HBM only) gives each partition its own row of dim ``indirect_dim``. On-
    # chip, the first pair is the partition dim (partitions are read contiguously).
    from . import dtypes as dtm
    from .context import current
    st = t._st
    if t._gather is not None:
        raise IndexingError(".ap cannot be applied to an indirect (gathered) view",
                            rule="ap-indirect-view", value=t.name)
    new_dt = t._dtype if dtype is None else dtm.as_dtype(dtype)
    sd = dtm.storage_dtype(new_dt, current().options.precise_fp)
    isz = sd.itemsize
    if pattern is None:
        raise IndexingError(".ap needs a pattern [[step, num], ...]", rule="ap-pattern")
    pattern = [list(p) for p in pattern]
    if not pattern:
        raise IndexingError(".ap needs at least one [step, num] pair", rule="ap-pattern")
    for p in pattern:
        if len(p) != 2 or not all(_is_int(x) for x in p) or int(p[1]) <= 0:
            raise IndexingError(f".ap pattern entries must be [step, num] integer pairs with num > 0, "
                                f"got {p}", rule="ap-pattern", value=p)
    pattern = [[int(a), int(n)] for a, n in pattern]
    if scalar_offset is not None and vector_offset is not None:
        raise IndexingError(".ap takes scalar_offset or vector_offset, not both",
                            rule="ap-indirect", value="scalar_offset and vector_offset")
    nd = t.ndim
    d_ind = int(indirect_dim) + nd if int(indirect_dim) < 0 else int(indirect_dim)
    if (scalar_offset is not None or vector_offset is not None) and not 0 <= d_ind < max(nd, 1):
        raise IndexingError(f".ap indirect_dim {indirect_dim} is not a dim of '{t.name}' {t.shape}",
                            rule="ap-indirect", limit=f"0..{nd - 1}", value=indirect_dim)
    off_bytes = int(offset or 0) * isz
    shape = tuple(n for _, n in pattern)
    on_chip = st.memory != "hbm"
    if scalar_offset is not None:
        v = _scalar_value(scalar_offset)
        if on_chip and d_ind == (t._pdim or 0):
            off_bytes += v * st.row_bytes
        else:
            off_bytes += v * (t._strides[d_ind] if nd else t.itemsize)
    if not on_chip:
        strides = tuple(a * isz for a, _ in pattern)
        start = t._off + off_bytes
        if vector_offset is not None:
            return _vector_offset_view(t, pattern, start, vector_offset, d_ind, new_dt, sd)
        lo = start + sum(min(0, (n - 1) * s) for s, n in zip(strides, shape))
        hi = start + sum(max(0, (n - 1) * s) for s, n in zip(strides, shape)) + isz
        if lo < st.base_off or hi > st.base_off + st.nbytes:
            if scalar_offset is not None and (start - st.base_off) % isz == 0:
                # a run-time offset: out of range is an access-time error, or skipped by a DMA
                # with oob_mode.skip, so keep the view as an (out-of-range) gather
                free = np.zeros(shape, dtype=np.int64)
                for i, (a, n) in enumerate(pattern):
                    sh = [1] * len(shape)
                    sh[i] = n
                    free = free + (np.arange(n, dtype=np.int64) * a).reshape(sh)
                return _flat_gather(t, (start - st.base_off) // isz + free, shape, new_dt, sd, ())
            return _deferred_oob(t, shape, new_dt, OutOfBoundsError(
                f".ap pattern {pattern} (offset {offset}) leaves tensor '{t.name}'",
                rule="err_tensor_access_out_of_bound", limit=f"{st.nbytes} B",
                value=f"bytes {lo - st.base_off}..{hi - st.base_off}"))
        r = type(t)(st, start, shape, strides, new_dt, None, owner=t._owner, name=t._name)
    else:
        if vector_offset is not None:
            raise IndexingError(".ap vector_offset indexes HBM tensors only", rule="ap-indirect",
                                limit="hbm", value=st.memory)
        row = st.row_bytes
        row_el = row // isz
        pstep, pnum = pattern[0]
        view_free = _prod_int(t.shape[1:]) * t.itemsize // isz if nd > 1 else 1
        if pnum > 1 and pstep not in (row_el, view_free):
            raise IndexingError(f".ap partition step must equal the tensor's free size ({row_el} "
                                f"elements of {dtm.name(new_dt)})", rule="ap-partition",
                                limit=row_el, value=pstep)
        p_v, b_v = divmod(t._off - st.base_off, st.pstride) if st.pstride else (0, 0)
        lin = p_v * row + b_v + off_bytes
        p0, f0 = divmod(lin, row) if row else (0, 0)
        strides = (st.pstride,) + tuple(a * isz for a, _ in pattern[1:])
        hi = f0 + sum(max(0, (n - 1) * s) for s, n in zip(strides[1:], shape[1:])) + isz
        lo = f0 + sum(min(0, (n - 1) * s) for s, n in zip(strides[1:], shape[1:]))
        if p0 < 0 or p0 + pnum > st.partitions or hi > row or lo < 0:
            return _deferred_oob(t, shape, new_dt, OutOfBoundsError(
                f".ap pattern {pattern} (offset {offset}) leaves tensor '{t.name}'",
                rule="err_tensor_access_out_of_bound",
                limit=f"{st.partitions} partitions x {row} B",
                value=f"partitions {p0}..{p0 + pnum - 1}, bytes {lo}..{hi}"))
        r = type(t)(st, st.base_off + p0 * st.pstride + f0, shape, strides, new_dt, 0,
                      owner=t._owner, name=t._name)
    if sd != st.sdtype:
        r = _retype(r, sd)
    return r


def _prod_int(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


class _RowIndex:
    """Flat element index of a ``vector_offset`` view, computed from the index tile's values
    when the access happens (the tile may be rewritten after the view is built)."""
    __slots__ = ("rows", "start_el", "row_el", "free", "shape")

    def __init__(self, rows: NkiTensor, start_el: int, row_el: int, free: np.ndarray, shape):
        self.rows = rows
        self.start_el = start_el
        self.row_el = row_el
        self.free = free
        self.shape = shape

    def resolve_index(self, tile_values=None) -> np.ndarray:
        v = tile_values[id(self.rows)] if tile_values else self.rows.array()
        # DGE row indices are unsigned 32-bit (the ISA's index tiles are uint32): a negative int32
        # index (-1, the NKI library's "no token") is a huge row, out of bounds, never a row
        # counted back from the view's offset into the previous slice
        rows = np.asarray(v).reshape(-1).astype(np.int64).astype(np.uint32).astype(np.int64)
        rows = rows[: self.shape[0]]
        rows = rows.reshape((self.shape[0],) + (1,) * (len(self.shape) - 1))
        return self.start_el + rows * self.row_el + self.free


def _vector_offset_view(t: NkiTensor, pattern, start: int, rows, d_ind: int, new_dt, sd) -> NkiTensor:
    """A gather over the flat storage: partition p reads row ``rows[p]`` of dim ``d_ind``."""
    st = t._st
    isz = sd.itemsize
    if not isinstance(rows, type(t)):
        raise IndexingError(".ap vector_offset must be an SBUF tensor of row indices",
                            rule="ap-indirect", value=type(rows).__name__)
    shape = tuple(n for _, n in pattern)
    if rows.shape[0] < shape[0]:
        raise IndexingError(f".ap vector_offset has {rows.shape[0]} rows for {shape[0]} partitions",
                            rule="ap-indirect", limit=shape[0], value=rows.shape[0])
    stride_b = t._strides[d_ind] if t.ndim else isz
    if stride_b % isz or (start - st.base_off) % isz:
        raise IndexingError(".ap vector_offset needs element-aligned strides", rule="ap-indirect",
                            value=stride_b)
    free = np.zeros((1,) + shape[1:], dtype=np.int64)
    for i, (a, n) in enumerate(pattern[1:]):
        sh = [1] * len(shape)
        sh[i + 1] = n
        free = free + (np.arange(n, dtype=np.int64) * a).reshape(sh)
    idx = _RowIndex(rows, (start - st.base_off) // isz, stride_b // isz, free, shape)
    return _flat_gather(t, idx, shape, new_dt, sd, (rows,))


class _Deferred:
    """The index of a view that lies outside its tensor: kernels may build such a view and only
    use it under a guard, so the error is raised when (if) the view is accessed."""
    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error

    def resolve_index(self, tile_values=None):
        raise self.error


def _deferred_oob(t: NkiTensor, shape, new_dt, error: Exception) -> NkiTensor:
    g = Gather(t, (_Deferred(error),), tuple(shape), ())
    return type(t)(t._st, t._off, tuple(shape), (0,) * len(shape), new_dt,
                     0 if t._st.memory != "hbm" else None, gather=g, owner=t._owner, name=t._name)


def _flat_gather(t: NkiTensor, index, shape, new_dt, sd, tiles) -> NkiTensor:
    """A gather of ``t``'s storage seen as a flat element array (``index``: flat element
    positions, an array or an object resolved at access time)."""
    st = t._st
    isz = sd.itemsize
    flat = type(t)(st, st.base_off, (st.nbytes // isz,), (isz,), new_dt, None, owner=t._owner,
                     name=t._name)
    if sd != st.sdtype:
        flat = _retype(flat, sd)
    g = Gather(flat, (index,), tuple(shape), tuple(tiles))
    return type(t)(flat._st, st.base_off, tuple(shape), (0,) * len(shape), new_dt, None, gather=g,
                     owner=t._owner, name=t._name)


def rearrange(t: NkiTensor, src_pattern, dst_pattern, fixed_sizes) -> NkiTensor:
    """einops-style ``rearrange`` as a view: split the grouped source dims, permute the names,
    merge the grouped destination dims."""
    def groups(pat):
        out = []
        for g in pat:
            out.append(tuple(g) if isinstance(g, (tuple, list)) else (g,))
        return out
    src, dst = groups(src_pattern), groups(dst_pattern)
    if len(src) != t.ndim:
        raise ShapeError(f"rearrange source pattern names {len(src)} dims, tensor has {t.ndim}",
                         rule="rearrange-pattern", limit=t.ndim, value=len(src))
    names = [n for g in src for n in g]
    if sorted(names) != sorted(n for g in dst for n in g) or len(set(names)) != len(names):
        raise ShapeError("rearrange patterns must name the same dims once each",
                         rule="rearrange-pattern", value=(src_pattern, dst_pattern))
    sizes = {}
    for g, n in zip(src, t.shape):
        known = [fixed_sizes[x] for x in g if x in fixed_sizes and fixed_sizes[x] != -1]
        unknown = [x for x in g if x not in fixed_sizes or fixed_sizes[x] == -1]
        prod = _prod_int(known)
        if len(unknown) > 1 or (unknown and n % prod) or (not unknown and prod != n):
            raise ShapeError(f"rearrange cannot split a dim of {n} into {g}",
                             rule="rearrange-sizes", value=(g, fixed_sizes))
        for x in g:
            sizes[x] = int(fixed_sizes[x]) if x in _known_names(fixed_sizes) else n // prod
    split = t.reshape(tuple(sizes[n] for n in names))
    order = [names.index(n) for g in dst for n in g]
    perm = split.permute(order) if order != list(range(len(order))) else split
    return perm.reshape(tuple(_prod_int(sizes[n] for n in g) for g in dst))


def _known_names(fixed_sizes) -> set:
    return {k for k, v in fixed_sizes.items() if v != -1}


def _contig_strides(shape, isz):
    out = []
    acc = isz
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _scalar_value(x) -> int:
    reg = getattr(x, "_trnsim_register_value", None)
    if reg is not None:
        return int(reg())
    if hasattr(x, "_st") and hasattr(x, "array"):   # a tensor (not imported: tensor.py needs this module)
        return int(np.asarray(x.array()).reshape(-1)[0])
    if _is_int(x):
        return int(x)
    raise IndexingError("scalar_offset must be a register, a 1x1 tensor or an int",
                        rule="ap-scalar-offset", value=type(x).__name__)
