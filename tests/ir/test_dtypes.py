"""The trace's dtype table (trnsim/ir/dtypes.py) against numpy / ml_dtypes item sizes."""
import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import TrnsimError
from trnsim.ir import dtypes


@pytest.mark.parametrize("name", ["float64", "int64", "uint64", "float32", "int32", "uint32",
                                  "float16", "int16", "uint16", "int8", "uint8", "bool"])
def test_numpy_widths(name):
    assert dtypes.width(name) == np.dtype(np.bool_ if name == "bool" else name).itemsize


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3", "float8_e5m2", "float8_e3m4",
                                  "float8_e4m3fn", "float8_e8m0fnu"])
def test_ml_dtypes_widths(name):
    assert dtypes.width(name) == np.dtype(getattr(ml_dtypes, name)).itemsize


def test_packed_and_container_types():
    assert dtypes.width("tfloat32") == 4           # stored as fp32
    assert dtypes.width("float8_e4m3fn_x4") == 4   # four 1-byte values per element
    assert dtypes.width("float4_e2m1fn_x4") == 2   # four 4-bit values per element


def test_unknown_names_default_or_raise():
    assert dtypes.width("complex32") == 4          # the historical fp32-word default
    with pytest.raises(TrnsimError) as ei:
        dtypes.width("complex32", default=None)
    assert ei.value.rule == "dtype" and ei.value.value == "complex32"


def test_classes():
    assert dtypes.SIXTEEN_BIT_FLOATS == {"bfloat16", "float16"}
    assert "float8_e4m3fn" in dtypes.FP8 and "tfloat32" in dtypes.FP32
