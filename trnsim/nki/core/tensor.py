"""NkiTensor: a view (storage, byte offset, shape, byte strides) of HBM, SBUF or PSUM.

Indexing follows both NKI generations:
- basic: ints, slices, ``...``, ``nl.ds``; on-chip tensors never drop below 2 dims (an int on the
  partition dim keeps it at size 1, an int on the last free dim keeps a size-1 dim);
- legacy affine: ``nl.arange``/``nl.mgrid`` expressions.  Any affine subscript of a strided view is
  again a strided view, so these stay views (writes go straight to the storage);
- non-affine index arrays and index *tiles* (indirect DMA) give a deferred gather/scatter access;
- legacy block dims: dims before ``par_dim`` index independent tiles; with ``mod_alloc`` blocks wrap
  modulo the number of physical tiles (resolved per block index).
Bounds are checked; an out-of-range access is an error unless a mask later excludes it.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional, Tuple

import numpy as np

from ...errors import IndexingError, ShapeError, UnsupportedError
from . import dtypes as dt, fastpath
from .access_kinds import BlockMap, Gather  # noqa: F401  (re-exported)
from .views import ViewMethods
from .refcount import _TEMP_REFS, _TEMP_REFS_INPLACE
from .storage import Storage, retype as _retype  # noqa: F401  (re-exported)


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


class NkiTensor(ViewMethods):
    """A tensor in HBM, SBUF or PSUM; what ``nl.ndarray`` returns and every ISA op takes."""
    __array_ufunc__ = None  # numpy scalars defer to our reflected operators
    __slots__ = ("_st", "_off", "_shape", "_strides", "_dtype", "_pdim", "_arr", "_gather",
                 "_blocks", "_fresh", "_mask", "_reduce_op", "_owner", "_name", "_region",
                 "_views", "__weakref__")

    def __init__(self, st: Storage, off: int, shape: Tuple[int, ...], strides: Tuple[int, ...],
                 dtype: np.dtype, pdim: Optional[int], *, gather: Optional[Gather] = None,
                 blocks: Optional[BlockMap] = None, owner=None, name: Optional[str] = None):
        self._st = st
        self._off = off
        self._shape = shape
        self._strides = strides
        self._dtype = dtype
        self._pdim = pdim
        self._arr = None
        self._gather = gather
        self._blocks = blocks
        self._fresh = None
        self._mask = None
        self._reduce_op = None
        self._owner = owner
        self._name = name
        self._region = None  # cached trace Region (a view's geometry never changes)
        self._views = None   # basic subscript key -> view (indexing.subscript)

    # -- public attributes ------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, ...]:
        """The tensor's shape (partition dim first for tiles)."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The NKI dtype of the elements."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return _prod(self._shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element as stored."""
        return self._st.sdtype.itemsize

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in elements (new-API ``NkiTensor.strides``)."""
        e = self.itemsize
        return tuple(s // e for s in self._strides)

    @property
    def offset(self) -> int:
        """Element offset of this view from the start of its allocation (row-major over the
        partition rows for on-chip tensors)."""
        st = self._st
        rel = self._off - st.base_off
        e = self.itemsize
        if st.memory == "hbm" or not st.pstride:
            return rel // e
        p, b = divmod(rel, st.pstride)
        return p * (st.row_bytes // e) + b // e

    @property
    def buffer(self) -> str:
        """The buffer kind: sbuf, psum, hbm, shared_hbm or private_hbm."""
        return self._st.kind

    @property
    def name(self) -> str:
        """The tensor's name (its allocation's unless the view has its own)."""
        return self._name or self._st.name

    @property
    def memory(self) -> str:
        """The memory: sbuf, psum or hbm."""
        return self._st.memory

    @property
    def on_chip(self) -> bool:
        """True in SBUF or PSUM."""
        return self._st.memory != "hbm"

    @property
    def is_tile(self) -> bool:
        """On-chip with the partition dim first (no legacy block dims left)."""
        return self._pdim == 0 and self._gather is None

    def __repr__(self):
        return (f"NkiTensor(name={self.name!r}, shape={self._shape}, dtype={dt.name(self._dtype)}, "
                f"buffer={self._st.kind})")

    def __len__(self):
        return self._shape[0]

    def __iter__(self):
        raise TypeError("NKI tensors are not iterable; index them with a loop variable")

    def __bool__(self):
        from .context import maybe_current
        ctx = maybe_current()
        if ctx is not None and ctx.conventions.tensor_truthiness:
            return True  # kernels test presence (``if params.bias:``), as on any object
        raise IndexingError("a tensor's values cannot drive Python control flow inside a kernel",
                            rule="err_control_flow_condition_depending_on_arange")

    __hash__ = object.__hash__

    # -- numpy access -----------------------------------------------------------------------
    def array(self) -> np.ndarray:
        """The numpy view of this tensor's storage (storage dtype); gathers return a copy."""
        if fastpath.QUEUED and self._st.memory == "psum":
            fastpath.drain()  # queued accumulations (fastpath.gemm_submit) still write PSUM
        a = self._arr
        if a is None:
            if self._gather is not None:
                return self._gather_read(None)
            if self._blocks is not None:
                raise IndexingError("a manually allocated block tensor must be indexed by its block "
                                    "dims before use", rule="err_failed_to_infer_tile_from_local_tensor",
                                    value=self._shape)
            st = self._st
            a = np.ndarray(self._shape, dtype=st.sdtype, buffer=st.data, offset=self._off,
                           strides=self._strides)
            self._arr = a
        return a

    def init_view(self) -> Optional[np.ndarray]:
        """The init map with this view's geometry (nonzero: the element was written; see
        ``Storage.init_dtype``); None if the storage is fully initialized."""
        st = self._st
        if st.full:
            return None
        return np.ndarray(self._shape, dtype=st.init_dtype, buffer=st.init, offset=self._off,
                          strides=self._strides)

    def _gather_read(self, mask) -> np.ndarray:
        g = self._gather
        base = g.base.array()
        idx = g.resolve()
        if mask is None:
            return base[idx]
        out = np.zeros(g.shape, dtype=base.dtype)
        sel = tuple(i[mask] for i in idx)
        out[mask] = base[sel]
        return out

    # -- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key) -> "NkiTensor":
        views = self._views  # reused basic views (subscript.py): the hit is looked up here, in C
        if views is not None:
            m = fastpath.module()
            if m is not None:
                v = views.get(m.view_key(key))  # None (not a plain key) is never a cache key
                if v is not None:
                    return v
        return _hooks.subscript(self, key)

    def __setitem__(self, key, value) -> None:
        n = sys.getrefcount(value)
        # A value referenced only by the interpreter stack is a temporary: its instruction can
        # write straight into the destination, as the NKI compiler does.
        _hooks.assign(self[key], value, temporary=n <= _TEMP_REFS)

    # -- views ------------------------------------------------------------------------------
    def _derive(self, off, shape, strides, pdim=None, dtype=None, blocks=None, owner=None):
        return NkiTensor(self._st, off, tuple(shape), tuple(strides),
                         self._dtype if dtype is None else dtype,
                         self._pdim if pdim is None else pdim, blocks=blocks,
                         owner=self._owner if owner is None else owner, name=self._name)

    def is_contiguous(self) -> bool:
        """Row-major contiguous; for on-chip tensors over the free dims only (partitions are
        separate memories)."""
        if self._gather is not None:
            return False
        exp = self.itemsize
        dims = list(zip(self._shape, self._strides))
        if self._pdim is not None and self._pdim < len(dims):
            dims = dims[self._pdim + 1:]
        for n, s in reversed(dims):
            if n != 1 and s != exp:
                return False
            exp *= n
        return True

    def reshape(self, *shape, **kw) -> "NkiTensor":
        """A view with another shape; the elements must be contiguous (or the dims split/merged)."""
        if "shape" in kw:
            shape = kw.pop("shape")
        elif len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = _prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if _prod(shape) != self.size:
            raise ShapeError(f"cannot reshape {self._shape} into {shape}: element counts differ",
                             rule="reshape-count", limit=self.size, value=_prod(shape))
        if self._gather is not None or self._blocks is not None:
            raise IndexingError("reshape needs a plain strided tensor", rule="reshape-view")
        arr = self.array()
        try:
            new = arr.view()
            new.shape = shape  # raises when a copy would be needed
        except AttributeError:
            raise IndexingError(f"cannot reshape non-contiguous view {self._shape} into {shape} "
                                "without a copy", rule="reshape-contiguous", value=self._strides) from None
        pdim = self._pdim
        if self.on_chip:
            if shape[0] != self._shape[0]:
                raise ShapeError("reshape of an on-chip tensor must keep the partition dim",
                                 rule="reshape-partition", limit=self._shape[0], value=shape[0])
            pdim = 0
        return self._derive(self._off, shape, new.strides, pdim=pdim)

    def broadcast_to(self, shape, *args) -> "NkiTensor":
        """A stride-0 view repeating size-1 dims (partition dim included)."""
        if args or isinstance(shape, int):
            shape = (shape,) + tuple(args)
        shape = tuple(int(s) for s in shape)
        if len(shape) != len(self._shape):
            raise ShapeError(f"broadcast_to needs the same rank: {self._shape} -> {shape}",
                             rule="broadcast-rank", limit=len(self._shape), value=len(shape))
        strides = []
        for n, m, s in zip(self._shape, shape, self._strides):
            if n == m:
                strides.append(s)
            elif n == 1:
                strides.append(0)
            else:
                raise ShapeError(f"cannot broadcast {self._shape} to {shape}", rule="broadcast-shape",
                                 value=shape)
        t = self._derive(self._off, shape, strides)
        t._fresh = self._fresh
        t._mask = self._mask
        return t

    def view(self, dtype) -> "NkiTensor":
        """Reinterpret the bytes as another dtype; the last dim is rescaled by the size ratio."""
        new = dt.as_dtype(dtype)
        from .context import current
        sd = dt.storage_dtype(new, current().options.precise_fp)
        old_size, new_size = self.itemsize, sd.itemsize
        if old_size == new_size:
            t = self._derive(self._off, self._shape, self._strides, dtype=new)
            t._st = self._st  # same bytes, new element type
            return _retype(t, sd)
        if not self.is_contiguous_last():
            raise IndexingError("view(dtype) needs a unit-stride last dim", rule="view-dtype")
        last = self._shape[-1] * old_size
        if last % new_size:
            raise ShapeError(f"last dim of {last} bytes is not a multiple of {new_size}",
                             rule="view-dtype", value=last)
        shape = self._shape[:-1] + (last // new_size,)
        strides = self._strides[:-1] + (new_size,)
        t = self._derive(self._off, shape, strides, dtype=new)
        return _retype(t, sd)

    reinterpret_cast = view

    def is_contiguous_last(self) -> bool:
        """True when the last dim has unit stride (or one element)."""
        return self._shape[-1] == 1 or self._strides[-1] == self.itemsize

    def astype(self, dtype):
        """Host-side numpy cast: not available inside a kernel (an UnsupportedError)."""
        raise UnsupportedError("tensor.astype is host-side numpy; inside a kernel use nl.copy(x, "
                               "dtype=...) or nisa.tensor_copy", rule="astype")

    # -- arithmetic operators: the legacy nl elementwise ops ---------------------------------
    def _binop(self, other, name, reverse=False):
        return _hooks.operator(name, self, other, reverse)

    def __add__(self, o): return self._binop(o, "add")
    def __radd__(self, o): return self._binop(o, "add", True)
    def __sub__(self, o): return self._binop(o, "subtract")
    def __rsub__(self, o): return self._binop(o, "subtract", True)
    def __mul__(self, o): return self._binop(o, "multiply")
    def __rmul__(self, o): return self._binop(o, "multiply", True)
    def __truediv__(self, o): return self._binop(o, "divide")
    def __rtruediv__(self, o): return self._binop(o, "divide", True)
    def __pow__(self, o): return self._binop(o, "power")
    def __rpow__(self, o): return self._binop(o, "power", True)
    def __mod__(self, o): return self._binop(o, "mod")
    def __lt__(self, o): return self._binop(o, "less")
    def __le__(self, o): return self._binop(o, "less_equal")
    def __gt__(self, o): return self._binop(o, "greater")
    def __ge__(self, o): return self._binop(o, "greater_equal")
    def __eq__(self, o): return self._binop(o, "equal")  # type: ignore[override]
    def __ne__(self, o): return self._binop(o, "not_equal")  # type: ignore[override]
    def __and__(self, o): return self._binop(o, "bitwise_and")
    def __rand__(self, o): return self._binop(o, "bitwise_and", True)
    def __or__(self, o): return self._binop(o, "bitwise_or")
    def __ror__(self, o): return self._binop(o, "bitwise_or", True)
    def __xor__(self, o): return self._binop(o, "bitwise_xor")
    def __rxor__(self, o): return self._binop(o, "bitwise_xor", True)
    def __lshift__(self, o): return self._binop(o, "left_shift")
    def __rshift__(self, o): return self._binop(o, "right_shift")

    def __neg__(self):
        return _hooks.operator("multiply", self, -1, False)

    def __invert__(self):
        return _hooks.unary("invert", self)

    def __abs__(self):
        return _hooks.unary("abs", self)

    def _inplace(self, o, name, refs):
        return _hooks.inplace(self, o, name, temporary=refs <= _TEMP_REFS_INPLACE)

    # each reads the refcount as its first statement, exactly as the calibration probe does
    def __iadd__(self, o):
        n = sys.getrefcount(o)
        # the hook directly (not through _inplace): ``psum += nc_matmul(...)`` runs per matmul
        return _hooks.inplace(self, o, "add", temporary=n <= _TEMP_REFS_INPLACE)

    def __isub__(self, o):
        n = sys.getrefcount(o)
        return self._inplace(o, "subtract", n)

    def __imul__(self, o):
        n = sys.getrefcount(o)
        return self._inplace(o, "multiply", n)

    def __itruediv__(self, o):
        n = sys.getrefcount(o)
        return self._inplace(o, "divide", n)


class _Hooks:
    """What subscripts, assignments and operators do.  The layer above (``trnsim.nki.ops``, which
    imports this module) registers them when it is imported, so the tensor type never imports
    upward; ``trnsim.nki`` imports the ops, so they are in place before any kernel runs."""
    __slots__ = ("subscript", "assign", "inplace", "operator", "unary")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, _unregistered)


def _unregistered(*a, **kw):
    raise RuntimeError("trnsim.nki.ops was not imported: tensor operators are not registered")


def register_hooks(**fns: Callable) -> None:
    """Install the subscript / assign / inplace / operator / unary behaviour of ``NkiTensor``."""
    for name, fn in fns.items():
        if name not in _Hooks.__slots__:
            raise ValueError(f"unknown tensor hook {name!r}")
        setattr(_hooks, name, fn)


_hooks = _Hooks()
