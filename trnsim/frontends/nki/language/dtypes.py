"""``nki.language`` data types (also served as ``nki.dtype`` / ``nki.language.dtypes``).

They are numpy dtypes (ml_dtypes for the low-precision floats), so host code can write
``np.zeros(shape, dtype=nl.bfloat16)``; the x4-packed MX types are distinct structured dtypes whose
host arrays travel as uint32 (fp8 x4) / uint16 (fp4 x4).
"""
from __future__ import annotations

from ....nki.core import dtypes as _dt

DType = type(_dt.float32)

bool_ = _dt.bool_
bool = _dt.bool_  # noqa: A001  (nki-library writes nl.bool)
int8 = _dt.int8
int16 = _dt.int16
int32 = _dt.int32
uint8 = _dt.uint8
uint16 = _dt.uint16
uint32 = _dt.uint32
float16 = _dt.float16
float32 = _dt.float32
bfloat16 = _dt.bfloat16
tfloat32 = _dt.tfloat32
float8_e4m3 = _dt.float8_e4m3
float8_e4m3fn = _dt.float8_e4m3fn
float8_e5m2 = _dt.float8_e5m2
float8_e8m0fnu = _dt.float8_e8m0fnu
float8_e5m2_x4 = _dt.float8_e5m2_x4
float8_e4m3fn_x4 = _dt.float8_e4m3fn_x4
float4_e2m1fn_x4 = _dt.float4_e2m1fn_x4

ALL = (bool_, int8, int16, int32, uint8, uint16, uint32, float16, float32, bfloat16, tfloat32,
       float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float8_e5m2_x4, float8_e4m3fn_x4,
       float4_e2m1fn_x4)
