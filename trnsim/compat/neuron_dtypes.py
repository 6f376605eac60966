"""``neuron_dtypes`` on trnsim: the host-side dtype helpers the public NKI library's tests import.

AWS's NKI library imports ``neuron_dtypes as dt`` (a package of the Neuron SDK, not on PyPI) for
host casts and sizes.  Its call sites use only: the dtype objects (``dt.bfloat16``,
``dt.float8_e4m3fn_x4`` ...), ``static_cast(array, dtype)`` (value casts with round-to-nearest-even,
and the x4 MX pack ``[.., 4n] -> [.., n]`` / unpack ``[.., n] -> [.., 4n]``), ``sizeinbytes``,
``finfo(dtype).dtype`` and ``is_float_type``.  Each is served by trnsim's own dtypes (ml_dtypes and
``trnsim.nki.ops.mx_format``), so an array cast here is the same array ``nl.static_cast`` gives.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DtypeError
from ..frontends import common as _common
from ..frontends.nki.language import dtypes as _nl
from ..nki.core import dtypes as _dt

# The dtype objects are nki.language's own, so ``{nl.float8_e4m3fn_x4: dt.float8_e4m3fn_x4}``
# (the library's NL_TO_DT_DTYPE table) maps each type to itself.
bool_ = _nl.bool_
int8 = _nl.int8
int16 = _nl.int16
int32 = _nl.int32
int64 = _dt.int64
uint8 = _nl.uint8
uint16 = _nl.uint16
uint32 = _nl.uint32
float16 = _nl.float16
float32 = _nl.float32
float64 = _dt.float64
bfloat16 = _nl.bfloat16
tfloat32 = _nl.tfloat32
float8_e4m3 = _nl.float8_e4m3
float8_e4m3fn = _nl.float8_e4m3fn
float8_e5m2 = _nl.float8_e5m2
float8_e8m0fnu = _nl.float8_e8m0fnu
float8_e5m2_x4 = _nl.float8_e5m2_x4
float8_e4m3fn_x4 = _nl.float8_e4m3fn_x4
float4_e2m1fn_x4 = _nl.float4_e2m1fn_x4

__all__ = ["static_cast", "sizeinbytes", "finfo", "is_float_type", "bfloat16", "float16",
           "float32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
           "float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4", "tfloat32", "int8", "int16",
           "int32", "int64", "uint8", "uint16", "uint32", "bool_", "float64"]


def _as_dtype(dtype: Any) -> np.dtype:
    """A dtype, a scalar type, a name, or an array / tensor whose ``.dtype`` is meant."""
    if hasattr(dtype, "dtype") and not isinstance(dtype, (np.dtype, type)):
        dtype = dtype.dtype
    return _dt.as_dtype(dtype)


def static_cast(input_data, dtype):
    """Host cast of a numpy array or scalar to ``dtype``: RNE for floats, x4 pack / unpack for the
    MX containers (four fp8 / fp4 values per element, value ``j`` in byte / nibble ``j``)."""
    return _common.static_cast(input_data, _as_dtype(dtype))


def sizeinbytes(dtype) -> int:
    """Bytes of one element: 4 for an fp8 x4 word, 2 for an fp4 x4 word, itemsize otherwise."""
    return _dt.itemsize(_as_dtype(dtype))


def finfo(dtype):
    """Limits of a float dtype (ml_dtypes' finfo for the low-precision ones; ``.dtype`` is the
    numpy dtype a host array of that NKI type uses)."""
    d = _as_dtype(dtype)
    if _dt.is_packed(d):
        raise DtypeError(f"finfo of the packed MX container {_dt.name(d)} is undefined: it holds "
                         "four values; ask for its element type", rule="finfo-packed",
                         limit="an unpacked float dtype", value=_dt.name(d),
                         hint="e.g. finfo(float8_e4m3fn) for float8_e4m3fn_x4")
    return _dt.finfo(d)


def is_float_type(dtype) -> bool:
    """True for floating-point dtypes, the ml_dtypes low-precision floats included."""
    # An x4 container is a word of packed bit fields (host arrays are uint32 / uint16 words that
    # np.isinf cannot read), so it is not a float type until unpacked with static_cast.
    d = _as_dtype(dtype)
    return _dt.is_float(d) and not _dt.is_packed(d)
