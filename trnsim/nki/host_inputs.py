"""Host arrays handed to a kernel launch, as the bytes of its HBM input tensors: converted to the storage
dtype only where needed, and a timing-only input of one repeated zero given lazily mapped zero pages."""
from __future__ import annotations

import mmap
from typing import Optional

import numpy as np

from .core import dtypes as dt


def storage_array(arr: np.ndarray, sd: np.dtype) -> np.ndarray:
    """``arr`` as a C-contiguous array of storage dtype ``sd`` (a copy only where needed)."""
    data = np.ascontiguousarray(arr)
    if data.dtype != sd:
        if data.dtype.kind == "f" or data.dtype in dt.LOW_PRECISION_FLOATS:
            data = data.astype(np.float32).astype(sd) if sd != np.float32 else data.astype(sd)
        else:
            data = data.astype(sd)
    return data


def zero_broadcast(arr: np.ndarray, sd: np.dtype) -> Optional[np.ndarray]:
    """A zero-filled byte buffer for ``arr`` when it is one all-zero-bytes value repeated with
    stride 0 in every dim (``np.broadcast_to(np.zeros((), dt), shape)``: the timing-only inputs of
    the op-cost build); None otherwise.  The buffer is an anonymous memory map: its zero pages are
    mapped lazily, so a timing-only run that never reads an input never touches its bytes.  (Not
    ``np.zeros``: the C allocator serves sizes under its adaptive mmap threshold, which grows as
    big buffers are freed, from the heap and clears them byte by byte.)"""
    if arr.ndim == 0 or arr.size <= 1 or any(arr.strides):
        return None
    one = storage_array(arr.reshape(-1)[:1], sd)
    if one.view(np.uint8).any():
        return None
    nbytes = arr.size * sd.itemsize
    private = getattr(mmap, "MAP_PRIVATE", None)  # copy-on-write across fork, like the heap
    if nbytes < mmap.PAGESIZE or private is None:
        return np.zeros(nbytes, np.uint8)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=private), np.uint8)
