"""Subscripts of NkiTensor: basic, legacy affine, block dims, gathers, and new-API ``.ap``."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...errors import IndexingError, OutOfBoundsError, ShapeError
from .index import DynSlice, IndexArray, IndexExpr, _bshape, _is_int
from .tensor import BlockMap, Gather, NkiTensor


def _oob(t: NkiTensor, dim: int, value, size: int) -> OutOfBoundsError:
    return OutOfBoundsError(f"index {value} is out of bounds for dim {dim} of '{t.name}' "
                            f"(shape {t.shape})", rule="err_tensor_access_out_of_bound",
                            limit=f"0..{size - 1}", value=value)


def _normalize(t: NkiTensor, key) -> list:
    if not isinstance(key, tuple):
        key = (key,)
    nd = t.ndim
    out = []
    ell = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ell) > 1:
        raise IndexingError("only one '...' is allowed in a subscript", rule="index-ellipsis")
    if ell:
        i = ell[0]
        n_explicit = len(key) - 1
        fill = nd - n_explicit
        if fill < 0:
            raise IndexingError(f"too many indices for '{t.name}' of shape {t.shape}",
                                rule="index-rank", limit=nd, value=n_explicit)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) > nd:
        raise IndexingError(f"too many indices for '{t.name}' of shape {t.shape}",
                            rule="index-rank", limit=nd, value=len(key))
    for k in key:
        out.append(_classify(k))
    return out


def _classify(k):
    if _is_int(k):
        return ("int", int(k))
    if isinstance(k, slice):
        return ("slice", k)
    if isinstance(k, DynSlice):
        return ("slice", k.to_slice())
    if isinstance(k, IndexExpr):
        return ("int", k.const) if not k.axes else ("expr", k)
    if isinstance(k, IndexArray):
        return ("arr", k)
    if isinstance(k, NkiTensor):
        return ("tile", k)
    if isinstance(k, np.ndarray) and k.dtype.kind in "iu":
        return ("arr", IndexArray(k, k.shape))
    reg = getattr(k, "_trnsim_register_value", None)
    if reg is not None:
        return ("int", int(reg()))
    if k is None:
        raise IndexingError("None (newaxis) is not allowed in an NKI subscript", rule="index-newaxis")
    if isinstance(k, (bool, np.bool_)):
        raise IndexingError("boolean indices are not supported", rule="index-type", value=k)
    raise IndexingError(f"unsupported index {k!r} of type {type(k).__name__}", rule="index-type",
                        value=type(k).__name__)


_VIEW_CACHE_MAX = 512  # views kept per tensor; kernels index the same tiles every iteration


def _view_key(key):
    """A hashable form of a subscript made only of Python ints and int/None slices, else None.
    Exact type checks: ``True == 1`` must not find the view of ``1`` (booleans are an error)."""
    if type(key) is not tuple:
        key = (key,)
    out = []
    for k in key:
        tk = type(k)
        if tk is int:
            out.append(k)
        elif tk is slice:
            a, b, c = k.start, k.stop, k.step
            if (a is None or type(a) is int) and (b is None or type(b) is int) and \
                    (c is None or type(c) is int):
                out.append((a, b, c))
            else:
                return None
        else:
            return None
    return tuple(out)


def subscript(t: NkiTensor, key) -> NkiTensor:
    if t._gather is not None:
        raise IndexingError("a gathered (indirect) access cannot be indexed again", rule="index-gather")
    if t._blocks is not None:
        return _block_subscript(t, key)
    # a basic subscript is a pure function of the tensor's geometry and the key: the view is
    # reused, with its cached array, fp32 view and trace region (kernels re-index every iteration)
    vk = _view_key(key)
    views = t._views
    if vk is not None and views is not None:
        v = views.get(vk)
        if v is not None:
            return v
    if vk is not None and len(vk) <= len(t._shape):  # Python ints and slices: no classifying
        ents = [("int", k) if type(k) is int else ("slice", k)
                for k in (key if type(key) is tuple else (key,))]
    else:
        ents = _normalize(t, key)
        kinds = {k for k, _ in ents}
        if kinds & {"expr", "arr", "tile"}:
            return _advanced(t, ents)
    v = _basic(t, ents)
    if vk is not None and v._gather is None:
        if views is None or len(views) >= _VIEW_CACHE_MAX:
            views = t._views = {}
        views[vk] = v
    return v


def _basic(t: NkiTensor, ents) -> NkiTensor:
    shape, strides = t._shape, t._strides
    nd = len(shape)
    off = t._off
    out_shape: List[int] = []
    out_strides: List[int] = []
    pdim = t._pdim
    on_chip = pdim is not None
    new_pdim = None
    for d in range(nd):
        n, s = shape[d], strides[d]
        kind, k = ents[d] if d < len(ents) else ("slice", slice(None))
        if kind == "int":
            i = k + n if k < 0 else k
            if not 0 <= i < n:
                raise _oob(t, d, k, n)
            off += i * s
            if on_chip and d == pdim:  # an int on the partition dim keeps a size-1 partition dim
                new_pdim = len(out_shape)
                out_shape.append(1)
                out_strides.append(s)
            continue
        start, stop, step = k.start, k.stop, k.step
        if step is None and (start is None and stop is None or
                             type(start) is int and type(stop) is int and 0 <= start < stop <= n):
            # ``:`` or an in-range ``lo:hi`` (what kernels write): no normalizing needed
            lo = 0 if start is None else start
            off += lo * s
            if on_chip and d == pdim:
                new_pdim = len(out_shape)
            out_shape.append(n if start is None else stop - start)
            out_strides.append(s)
            continue
        step = 1 if step is None else int(step)
        if step == 0:
            raise IndexingError("slice step cannot be zero", rule="index-slice")
        if start is not None and not _is_int(start) or stop is not None and not _is_int(stop):
            raise IndexingError(f"slice bounds must be integers, got {k}", rule="index-slice", value=k)
        lo = 0 if start is None else (int(start) + n if int(start) < 0 else int(start))
        hi = n if stop is None else (int(stop) + n if int(stop) < 0 else int(stop))
        if step < 0 and start is None:
            lo = n - 1
        if step < 0 and stop is None:
            hi = -1
        st_ = step
        cnt = len(range(lo, hi, st_))
        if cnt and (lo < 0 or lo >= n or lo + (cnt - 1) * st_ >= n or lo + (cnt - 1) * st_ < 0):
            # out of range: defer to access time, where a mask may exclude the excess
            return _slices_as_gather(t, ents)
        if cnt == 0:
            # an empty view is legal (kernels slice a shard that is empty on some core and never
            # touch it); an instruction that reads or writes it is the error (ops/base.py)
            if on_chip and d == pdim:
                new_pdim = len(out_shape)
            out_shape.append(0)
            out_strides.append(s * st_)
            continue
        off += lo * s
        if on_chip and d == pdim:
            new_pdim = len(out_shape)
        out_shape.append(cnt)
        out_strides.append(s * st_)
    if on_chip:
        if new_pdim is None:  # cannot happen: the partition dim is always kept
            new_pdim = 0
        # on-chip tensors keep >= 2 dims: a dropped last free dim comes back with size 1
        if len(out_shape) - new_pdim < 2:
            out_shape.append(1)
            out_strides.append(t.itemsize)
        pdim = new_pdim
    return t._derive(off, out_shape, out_strides, pdim=pdim if on_chip else None)


def _slices_as_gather(t: NkiTensor, ents) -> NkiTensor:
    """A basic subscript with an out-of-range slice, as a deferred gather (one axis per slice)."""
    nd = t.ndim
    ents = list(ents) + [("slice", slice(None))] * (nd - len(ents))
    slices = [(d, k) for d, (kind, k) in enumerate(ents) if kind == "slice"]
    nax = len(slices)
    new = []
    ax = 0
    for d, (kind, k) in enumerate(ents):
        if kind == "int":
            new.append((kind, k))
            continue
        n = t.shape[d]
        step = 1 if k.step is None else int(k.step)
        lo = 0 if k.start is None else (int(k.start) + n if int(k.start) < 0 else int(k.start))
        hi = n if k.stop is None else (int(k.stop) + n if int(k.stop) < 0 else int(k.stop))
        vals = np.arange(lo, hi, step, dtype=np.int64)
        shape = [1] * nax
        shape[ax] = len(vals)
        new.append(("arr", IndexArray(vals.reshape(shape), tuple(shape))))
        ax += 1
    bshape: Tuple[int, ...] = ()
    for kind, k in new:
        if kind == "arr":
            bshape = _bshape(bshape, tuple(k.shape))
    return _gather(t, new, bshape, [])


def _advanced(t: NkiTensor, ents) -> NkiTensor:
    shape, strides = t._shape, t._strides
    nd = len(shape)
    # implicit trailing full slices are allowed; explicit slices mixed with index expressions are not
    n_explicit = len(ents)
    for d, (kind, k) in enumerate(ents):
        if kind == "slice" and d < n_explicit:
            raise IndexingError("cannot mix slices (basic indexing) with nl.arange/mgrid index "
                                "expressions (advanced indexing) in one subscript",
                                rule="err_unsupported_mixing_basic_advanced_tensor_indexing",
                                limit="all basic (ints/slices) or all advanced (arange/mgrid)",
                                value=k)
    exprs = [k for kind, k in ents if kind in ("expr", "arr", "tile")]
    bshape: Tuple[int, ...] = ()
    for e in exprs:
        bshape = _bshape(bshape, tuple(e.shape))
    if len(bshape) < 2 and any(kind == "expr" for kind, _ in ents):
        raise IndexingError(f"'{t.name}' is indexed with a 1-D nl.arange; tile indices need at least "
                            "2 dims (lift it: nl.arange(n)[:, None])",
                            rule="err_1d_arange_not_supported", limit=">= 2-D index expressions",
                            value=f"{len(bshape)}-D index of shape {bshape}")
    trailing = list(range(len(ents), nd))
    if any(kind in ("arr", "tile") for kind, _ in ents):
        return _gather(t, ents, bshape, trailing)
    nr = len(bshape)
    res_strides = [0] * nr
    off = t._off
    pdim = t._pdim
    for d, (kind, k) in enumerate(ents):
        n, s = shape[d], strides[d]
        if kind == "int":
            i = k + n if k < 0 else k
            if not 0 <= i < n:
                raise _oob(t, d, k, n)
            off += i * s
            continue
        lo, hi = k.bounds()
        if lo < 0 or hi >= n:
            return _gather(t, ents, bshape, trailing, oob=True)
        off += k.const * s
        pad = nr - len(k.coefs)
        for a, c in enumerate(k.coefs):
            if c:
                res_strides[pad + a] += c * s
    out_shape = list(bshape) + [shape[d] for d in trailing]
    out_strides = res_strides + [strides[d] for d in trailing]
    if pdim is not None:
        if pdim >= len(ents) or ents[pdim][0] == "int":
            # partition dim fixed by an int: it becomes a size-1 leading dim
            if pdim < len(ents) and ents[pdim][0] == "int":
                out_shape.insert(0, 1)
                out_strides.insert(0, strides[pdim])
            else:
                raise IndexingError("advanced indexing must index the partition dim",
                                    rule="index-partition")
        else:
            pk = ents[pdim][1]
            pad = nr - len(pk.coefs)
            axes = [pad + a for a, c in enumerate(pk.coefs) if c]
            if axes != [0] or pk.coefs[0 - pad if pad == 0 else 0] not in (1,) and out_shape[0] > 1:
                if not (axes == [0] and pk.coefs[0] == 1):
                    raise IndexingError(
                        "the partition index of an on-chip tensor must run unit-stride along the "
                        "first axis of the index space (no striding across partitions)",
                        rule="partition-index", limit="unit stride along the first index axis",
                        value=repr(pk))
            for d, (kind, k) in enumerate(ents):
                if d != pdim and kind == "expr":
                    pad_k = nr - len(k.coefs)
                    if pad_k == 0 and k.coefs[0] and out_shape[0] > 1:
                        raise IndexingError("a free-dim index cannot vary along the partition axis",
                                            rule="partition-index", value=repr(k))
        if len(out_shape) < 2:
            out_shape.append(1)
            out_strides.append(t.itemsize)
        pdim = 0
    return t._derive(off, out_shape, out_strides, pdim=pdim)


def _gather(t: NkiTensor, ents, bshape, trailing, oob: bool = False) -> NkiTensor:
    if trailing:
        # express implicit trailing slices as extra index axes
        nr = len(bshape)
        extra = [t.shape[d] for d in trailing]
        bshape = tuple(bshape) + tuple(extra)
        ents = list(ents)
        for j, d in enumerate(trailing):
            s = [1] * len(bshape)
            s[nr + j] = t.shape[d]
            ents.append(("arr", IndexArray(np.arange(t.shape[d]).reshape(s), tuple(s))))
    index = []
    tiles = []
    for d, (kind, k) in enumerate(ents):
        if kind == "int":
            i = k + t.shape[d] if k < 0 else k
            if not 0 <= i < t.shape[d]:
                raise _oob(t, d, k, t.shape[d])
            index.append(np.asarray(i, dtype=np.int64))
        elif kind == "tile":
            if k.dtype.kind not in "iu":
                raise IndexingError(f"index tile '{k.name}' must hold integers",
                                    rule="index-tile-dtype", limit="an integer dtype",
                                    value=str(k.dtype))
            if t.on_chip:
                raise IndexingError(f"index tile '{k.name}' used on on-chip tensor '{t.name}': index "
                                    "tiles (indirect access) are only allowed into HBM tensors",
                                    rule="err_indirect_indices_free_dim", limit="hbm",
                                    value=t._st.memory)
            index.append(k)
            tiles.append(k)
        else:
            v = k.values()
            pad = len(bshape) - v.ndim
            if pad:
                v = v.reshape((1,) * pad + v.shape)
            index.append(v)
    g = Gather(t, tuple(index), tuple(int(x) for x in bshape), tuple(tiles))
    pdim = 0 if t._pdim is not None else None
    res = NkiTensor(t._st, t._off, g.shape, (0,) * len(g.shape), t._dtype, pdim, gather=g,
                    owner=t._owner, name=t._name)
    return res


def check_gather_bounds(t: NkiTensor, mask) -> Tuple[np.ndarray, ...]:
    """Resolve a gather's indices, requiring every unmasked element in bounds."""
    g = t._gather
    idx = g.resolve()
    base = g.base
    for d, ix in enumerate(idx):
        n = base.shape[d]
        bad = (ix < 0) | (ix >= n)
        if mask is not None and mask is not False:
            bad = bad & mask
        if bad.any():
            pos = np.argwhere(bad)[0]
            raise OutOfBoundsError(
                f"index {int(ix[tuple(pos)])} at element {tuple(int(p) for p in pos)} is out of bounds "
                f"for dim {d} of '{base.name}' (shape {base.shape}); mask it out or clamp it",
                rule="err_tensor_access_out_of_bound", limit=f"0..{n - 1}", value=int(ix[tuple(pos)]))
    return idx


def _block_subscript(t: NkiTensor, key) -> NkiTensor:
    bm = t._blocks
    nb = len(bm.block_shape)
    if not isinstance(key, tuple):
        key = (key,)
    if key and key[0] is Ellipsis and len(key) == 1:
        raise IndexingError("a manually allocated block tensor must be indexed by its block dims",
                            rule="err_failed_to_infer_tile_from_local_tensor", value=t.shape)
    ints = []
    for i, k in enumerate(key[:nb]):
        if isinstance(k, IndexExpr) and not k.axes:
            k = k.const
        if not _is_int(k):
            raise IndexingError("block dims of a mod_alloc/alloc tensor must be indexed with integers "
                                "(block tiles may share physical memory)",
                                rule="err_failed_to_infer_tile_from_local_tensor", value=k)
        n = bm.block_shape[i]
        k = int(k)
        if not 0 <= k < n:
            raise _oob(t, i, k, n)
        ints.append(k)
    if len(ints) < nb:
        done = tuple(ints)

        def fn(rest, _f=bm.fn, _d=done):
            return _f(_d + tuple(rest))
        sub = BlockMap(bm.block_shape[len(ints):], fn)
        r = NkiTensor(t._st, t._off, t.shape[len(ints):], t._strides[len(ints):], t._dtype,
                      t._pdim - len(ints), blocks=sub, owner=t._owner, name=t._name)
        r._owner = (t._owner, done)
        return r
    off = bm.fn(tuple(ints))
    tile = NkiTensor(t._st, off, t.shape[nb:], t._strides[nb:], t._dtype, 0,
                     owner=(t._owner, tuple(ints)) if not isinstance(t._owner, tuple)
                     else (t._owner[0], t._owner[1] + tuple(ints)), name=t._name)
    rest = key[nb:]
    if not rest:
        return tile
    return subscript(tile, rest)


def access_pattern(t: NkiTensor, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype):
    """New-API ``.ap``: a view built from explicit [step, num] pairs (outermost first) on the
    receiver's storage.  ``offset`` (elements of ``dtype``) is added to the receiver view's own
    start; ``scalar_offset`` adds ``value * stride(indirect_dim)`` of the receiver;
    ``vector_offset`` (HBM only) gives each partition its own row of dim ``indirect_dim``.
    On-chip, the first pair is the partition dim (partitions are read contiguously)."""
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
        r = NkiTensor(st, start, shape, strides, new_dt, None, owner=t._owner, name=t._name)
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
        r = NkiTensor(st, st.base_off + p0 * st.pstride + f0, shape, strides, new_dt, 0,
                      owner=t._owner, name=t._name)
    if sd != st.sdtype:
        from .tensor import _retype
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
        rows = np.asarray(v).reshape(-1).astype(np.int64)[: self.shape[0]]
        rows = rows.reshape((self.shape[0],) + (1,) * (len(self.shape) - 1))
        return self.start_el + rows * self.row_el + self.free


def _vector_offset_view(t: NkiTensor, pattern, start: int, rows, d_ind: int, new_dt, sd) -> NkiTensor:
    """A gather over the flat storage: partition p reads row ``rows[p]`` of dim ``d_ind``."""
    st = t._st
    isz = sd.itemsize
    if not isinstance(rows, NkiTensor):
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
    return NkiTensor(t._st, t._off, tuple(shape), (0,) * len(shape), new_dt,
                     0 if t._st.memory != "hbm" else None, gather=g, owner=t._owner, name=t._name)


def _flat_gather(t: NkiTensor, index, shape, new_dt, sd, tiles) -> NkiTensor:
    """A gather of ``t``'s storage seen as a flat element array (``index``: flat element
    positions, an array or an object resolved at access time)."""
    st = t._st
    isz = sd.itemsize
    flat = NkiTensor(st, st.base_off, (st.nbytes // isz,), (isz,), new_dt, None, owner=t._owner,
                     name=t._name)
    if sd != st.sdtype:
        from .tensor import _retype
        flat = _retype(flat, sd)
    g = Gather(flat, (index,), tuple(shape), tuple(tiles))
    return NkiTensor(flat._st, st.base_off, tuple(shape), (0,) * len(shape), new_dt, None, gather=g,
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
    if isinstance(x, NkiTensor):
        return int(np.asarray(x.array()).reshape(-1)[0])
    if _is_int(x):
        return int(x)
    raise IndexingError("scalar_offset must be a register, a 1x1 tensor or an int",
                        rule="ap-scalar-offset", value=type(x).__name__)
