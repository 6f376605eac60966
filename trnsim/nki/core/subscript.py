"""Subscripts of NkiTensor (``t[key]``): ints, slices, ``nl.ds``, affine index expressions, index
arrays and tiles (gathers), legacy block dims.  ``.ap`` access patterns live in access_pattern.py."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ...errors import IndexingError, OutOfBoundsError, ShapeError
from . import fastpath
from .index_exprs import DynSlice, IndexArray, IndexExpr, _bshape, _is_int
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
    """``t[key]``: a view (cached for plain int/slice keys), a gather or a block tile."""
    if t._gather is not None:
        raise IndexingError("a gathered (indirect) access cannot be indexed again", rule="index-gather")
    if t._blocks is not None:
        return _block_subscript(t, key)
    # a basic subscript is a pure function of the tensor's geometry and the key: the view is
    # reused, with its cached array, fp32 view and trace region (kernels re-index every iteration)
    m = fastpath.module()
    vk = _view_key(key) if m is None else m.view_key(key)
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
