"""Storage: the bytes behind tensors (one allocation), with initialization and ownership tracking.

A tensor view is (storage, byte offset, shape, byte strides), so every view of an allocation shares
one buffer, as views do on hardware.  Auto-allocated on-chip tensors get their own buffer laid out
partition-major (partition p at byte ``p * pstride``); manually placed tensors (``mod_alloc``,
``alloc``, ``address=``) are views into the core's single SBUF/PSUM buffer, so aliasing behaves as on
the chip.  ``init`` is a byte map parallel to the data: 1 where the byte holds a written value.
"""
from __future__ import annotations

import itertools
from typing import Optional

import numpy as np

_ids = itertools.count(1)

HBM_KINDS = ("hbm", "shared_hbm", "private_hbm")


_U8 = np.dtype(np.uint8)
# the unsigned integer as wide as an element: init marks and the NaN poison are stored through it
_UINT_OF_SIZE = {1: _U8, 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


class Storage:
    """The bytes behind tensors: one allocation (or input), its init map and fp32 cache."""
    __slots__ = ("id", "region_id", "memory", "kind", "name", "data", "_init", "full", "sdtype",
                 "readonly", "pstride", "partitions", "nbytes", "accounted", "accountant",
                 "manual", "loc", "owner", "is_output", "mutable", "base_off", "row_bytes",
                 "written", "_f32", "rcache", "hbm_pitch", "__weakref__")

    def __init__(self, *, memory: str, kind: str, name: str, nbytes: int, sdtype: np.dtype,
                 partitions: int, pstride: int, loc=None, data: Optional[np.ndarray] = None,
                 init: Optional[np.ndarray] = None, region_id: Optional[int] = None,
                 full: bool = False, fill: Optional[str] = "nan", readonly: bool = False):
        self.id = next(_ids)
        self.region_id = self.id if region_id is None else region_id
        self.memory = memory          # "hbm" | "sbuf" | "psum"
        self.kind = kind              # hbm kinds, or memory for on-chip
        self.name = name
        self.sdtype = sdtype
        self.pstride = pstride        # bytes per partition row (on-chip); 0 for HBM
        self.partitions = partitions
        self.nbytes = nbytes
        self.loc = loc
        self.readonly = readonly
        self.accounted = False
        self.accountant = None
        self.manual = data is not None and init is not None
        self.owner = None
        self.is_output = False
        self.mutable = False
        self.base_off = 0           # where this allocation starts in ``data`` (manual placement)
        self.row_bytes = pstride    # bytes per partition of this allocation (on-chip)
        self.written = 0            # bytes marked initialized since the last whole-map check
        self._f32 = None            # (fp32 copy, its views) of a 16-bit float storage (f32_view)
        self.rcache = None          # view geometry -> trace Region (context.region)
        # HBM: bytes per row of the allocation's own shape (its last dimension), so trace regions
        # are rows x column bytes and a column tile of a row-major tensor is an exact rectangle,
        # not a byte range spanning the whole tensor (context._region); 0 = one flat row
        self.hbm_pitch = 0
        if data is None:
            data = np.empty(max(nbytes, 1), dtype=np.uint8)
            if fill is not None and nbytes:
                _fill(data[:nbytes], sdtype, fill)
        self.data = data
        self._init = init  # allocated on first use (most result tiles are written whole)
        self.full = full
        if init is None and memory == "hbm" and not full:
            self.init  # shared by the LNC cores' threads: allocate before they race for it

    @classmethod
    def fresh(cls, memory: str, name: str, nbytes: int, sdtype: np.dtype, partitions: int,
              pstride: int, loc, data: np.ndarray) -> "Storage":
        """What ``cls(memory=memory, kind=memory, ..., data=data, full=True)`` builds for a fully
        written on-chip result tile (the hot ops' fresh tiles), without the keyword call and the
        branches of ``__init__`` (tests/nki/test_fastpath_storage.py holds the two equal)."""
        st = _new(cls)
        st.id = st.region_id = next(_ids)
        st.memory = st.kind = memory
        st.name = name
        st.sdtype = sdtype
        st.pstride = st.row_bytes = pstride
        st.partitions = partitions
        st.nbytes = nbytes
        st.loc = loc
        st.readonly = st.accounted = st.manual = st.is_output = st.mutable = False
        st.accountant = st.owner = st._f32 = st.rcache = st._init = None
        st.base_off = st.written = st.hbm_pitch = 0
        _DATA_SLOT.__set__(st, data)  # the slot itself: a subclass's data property is not run
        st.full = True
        return st

    def fp32_dirty(self) -> None:
        """Forget the fp32 shadow: called on every write to the storage."""
        self._f32 = None

    def f32_view(self, off: int, shape, strides) -> np.ndarray:
        """The fp32 values of a view of this 16-bit float storage (byte offset and strides in
        storage units): the whole storage is converted once and reused until the next write,
        so a bf16 tile read by many matmuls is converted once, not per instruction."""
        # The views are kept with that copy and dropped with it on a write (nothing outlives its
        # epoch).
        m = self._f32
        if m is None:
            n = self.nbytes // self.sdtype.itemsize
            m = self._f32 = (self.data[:n * self.sdtype.itemsize].view(self.sdtype)
                             .astype(np.float32), {})
        sh, views = m
        key = (off, shape, strides)
        v = views.get(key)
        if v is None:
            isz = self.sdtype.itemsize
            v = views[key] = np.ndarray(shape, dtype=np.float32, buffer=sh, offset=off * 4 // isz,
                                        strides=tuple(x * 4 // isz for x in strides))
        return v

    @property
    def init(self) -> np.ndarray:
        """The per-byte init map (nonzero: written), built on first use."""
        m = self._init
        if m is None:
            n = max(self.nbytes, 1)
            m = self._init = np.ones(n, np.uint8) if self.full else np.zeros(n, np.uint8)
        return m

    @init.setter
    def init(self, value: np.ndarray) -> None:
        """Share another storage's init map (manual placements share their buffer's)."""
        self._init = value

    @property
    def init_dtype(self) -> np.dtype:
        """How the init map is read and written: one unsigned integer as wide as an element, so a
        mark is one aligned store (value 1: the element's first byte is 1, the rest 0) instead
        of a strided byte store."""
        # Manually placed storages alias tensors of other dtypes at any byte, so they keep byte
        # marks.
        if self.manual:
            return _U8
        return _UINT_OF_SIZE.get(self.sdtype.itemsize, _U8)

    def all_initialized(self) -> bool:
        """Every element of the allocation marked initialized (its first byte nonzero)."""
        isz = self.sdtype.itemsize
        n = self.nbytes // isz
        d = self.init_dtype
        if d.itemsize == isz:
            return bool(self.init[:n * isz].view(d).all())
        return bool(self.init[:n * isz:isz].all())

    def ensure_init_map(self) -> None:
        """Give a fully-initialized storage a real init map (before a partial, tainted write)."""
        if self.full and self.init.size < self.nbytes:
            self.init = np.ones(max(self.nbytes, 1), dtype=np.uint8)

    def __repr__(self):
        return f"Storage({self.name!r}, {self.kind}, {self.nbytes} B)"


_DATA_SLOT = Storage.data
_new = object.__new__


class LazyStorage(Storage):
    """A result tile's storage whose values are computed from ``operands`` on first read of
    ``data`` (``compute``), so a hot path that writes them elsewhere never computes them here;
    new bytes drop the pending result (hot_matmul.PendingStorage, hot_update.PendingBinary)."""
    __slots__ = ("operands",)

    def compute(self, operands) -> np.ndarray:
        """The result's bytes (uint8, flat) from ``operands``."""
        raise NotImplementedError

    @property
    def data(self):
        """The bytes; the result is computed here if it is still pending."""
        ops = self.operands
        if ops is not None:
            self.operands = None
            _DATA_SLOT.__set__(self, self.compute(ops))
        return _DATA_SLOT.__get__(self)

    @data.setter
    def data(self, value):
        """New bytes: the pending result, if any, is dropped."""
        self.operands = None
        _DATA_SLOT.__set__(self, value)


def _fill(buf: np.ndarray, sdtype: np.dtype, fill: str) -> None:
    """Fresh allocations hold NaN (floats) or a marker (ints) so reads of garbage show up."""
    if fill == "zero":
        buf[:] = 0
        return
    n = buf.nbytes // sdtype.itemsize
    typed = buf[: n * sdtype.itemsize].view(sdtype)
    if sdtype.kind == "f" or sdtype.kind == "V" or str(sdtype) in ("bfloat16",) or \
            sdtype.name.startswith("float"):
        try:
            with np.errstate(invalid="ignore"):
                pattern = np.full(1, np.nan, dtype=np.float32).astype(sdtype)
        except (ValueError, TypeError):
            pattern = None
        if pattern is not None:
            # the NaN's bytes, stored through an unsigned view: one memset-speed pass (assigning
            # NaN through a bfloat16/fp8 view converts per element, ~15x slower)
            bits = _UINT_OF_SIZE.get(sdtype.itemsize)
            if bits is not None:
                buf[: n * sdtype.itemsize].view(bits).fill(pattern.view(bits)[0])
            else:
                typed[:] = pattern[0]
            return
    typed[:] = 4 if sdtype.kind in "iu" else 0  # the official simulator's integer sentinel


def retype(t, sd: np.dtype):
    """Tensor view ``t`` made to read its storage as dtype ``sd`` (an alias sharing bytes and init
    map; the original storage keeps the accounting)."""
    st = t._st
    if st.sdtype == sd:
        return t
    alias = Storage.__new__(Storage)
    for s in Storage.__slots__:
        if s == "__weakref__":
            continue
        try:
            object.__setattr__(alias, s, getattr(st, s))
        except AttributeError:
            pass
    alias.sdtype = sd
    alias.accountant = None  # the original storage does the accounting
    t._st = alias
    t._arr = None
    return t
