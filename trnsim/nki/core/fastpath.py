"""The functional core's C fast path (``_fastpath.c``), when built, and its numpy reference.

``pip install -e .`` compiles the extension as optional; without a compiler every caller keeps the
pure numpy expression, which the C code matches bit for bit (tests/nki/test_fastpath_*.py).
``TRNSIM_FASTPATH=0`` (read at import) or ``set_enabled(False)`` forces the reference path
everywhere: the numpy expressions, no product-buffer reuse, the general ``emit`` of matmul results.
The switch is a module flag, not an environment lookup per call: the matmul path reads it per
instruction.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from . import dtypes as dt

try:
    from . import _fastpath as _mod
except ImportError:  # not built (no compiler at install time)
    _mod = None

_OPS = {"add": 0, "subtract": 1, "multiply": 2}
_F32 = dt.float32
_BF16 = dt.bfloat16
_U16 = np.dtype(np.uint16)
_OFF = ("0", "false", "off", "no")


ON = os.environ.get("TRNSIM_FASTPATH", "").strip().lower() not in _OFF


def set_enabled(on: bool) -> bool:
    """Switch the fast paths on or off (tests compare both); returns the previous setting."""
    global ON
    was, ON = ON, bool(on)
    if not ON:
        product_buffers.clear()
    return was


def module():
    """The extension module, or None when it is not built or the fast paths are off."""
    return _mod if ON else None


def available() -> bool:
    """True when the C fast path is built and not switched off."""
    return module() is not None


def _bits(a: np.ndarray) -> Optional[np.ndarray]:
    """``a`` as the C code reads it: fp32 as is, bfloat16 as its uint16 bits; None otherwise."""
    d = a.dtype
    if d == _F32:
        return a
    if d == _BF16:
        return a.view(_U16)
    return None


def binary_to_bf16(name: str, a: np.ndarray, b: np.ndarray) -> Optional[np.ndarray]:
    """``bf16(f32(a) <name> f32(b))`` (round to nearest even) for add/subtract/multiply on
    same-shaped fp32/bf16 arrays, in one pass; None when the C path does not apply."""
    m = module()
    opc = _OPS.get(name)
    if m is None or opc is None or a.shape != b.shape or a.ndim == 0:
        return None
    xa, xb = _bits(a), _bits(b)
    if xa is None or xb is None:
        return None
    out = np.empty(a.shape, _BF16)
    m.binary_to_bf16(opc, xa, xb, out.view(_U16))
    return out


def f32_to_bf16(src: np.ndarray) -> Optional[np.ndarray]:
    """``src.astype(bfloat16)`` for an fp32 array (round to nearest even, ml_dtypes' NaN), in
    one C pass; None when the C path does not apply."""
    m = module()
    if m is None or src.dtype != _F32 or src.ndim == 0:
        return None
    out = np.empty(src.shape, _BF16)
    m.f32_to_bf16(src, out.view(_U16))
    return out


class ProductBuffers:
    """fp32 matmul product arrays handed back once their only use, the PSUM accumulation of a
    temporary ``psum += nc_matmul(...)``, is done; the next product of that shape is computed into
    one (``np.matmul(..., out=)``: the same BLAS call, no allocation, the buffer still in cache)."""
    __slots__ = ("_free",)
    _KEEP = 2  # per shape: one in flight, one spare (an accumulation loop needs no more)
    _SHAPES = 16  # shapes kept at once (at most 2 x 16 x 256 KB for 128x512 products)

    def __init__(self):
        self._free = {}

    def take(self, shape) -> Optional[np.ndarray]:
        """A C-contiguous fp32 array of ``shape`` to compute into, or None."""
        lst = self._free.get(shape)
        if lst:
            try:
                return lst.pop()
            except IndexError:  # another core's thread took the last one
                return None
        return None

    def give(self, arr: np.ndarray) -> bool:
        """Keep ``arr`` for a later product (the caller holds the only reference); False when it
        is not kept (fast paths off, not a whole fp32 array, enough spares)."""
        if not ON:
            return False
        if arr.dtype != _F32 or arr.base is not None or not arr.flags.c_contiguous or \
                not arr.flags.writeable:
            return False
        lst = self._free.get(arr.shape)
        if lst is None:
            if len(self._free) >= self._SHAPES:  # bound the memory kept: start over
                self._free.clear()
            lst = self._free[arr.shape] = []
        if len(lst) >= self._KEEP:
            return False
        lst.append(arr)
        return True

    def clear(self) -> None:
        """Drop every kept buffer."""
        self._free.clear()


product_buffers = ProductBuffers()
