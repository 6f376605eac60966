"""``neuron_dtypes`` (the Neuron SDK's host dtype helpers the NKI library's tests import) on trnsim:
every packed word below is assembled by hand from the fp8 / fp4 bit patterns of its four values."""
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.compat
import trnsim.frontends.nki.language as nl
from trnsim.compat import neuron_dtypes as dt
from trnsim.errors import TrnsimError


def _word(codes, bits):
    """Value j of an x4 element sits in byte / nibble j, least significant first."""
    return sum(c << (bits * j) for j, c in enumerate(codes))


def test_fp8_e4m3fn_x4_packs_four_values_into_one_word():
    # e4m3fn (bias 7): 1.0 = 0 0111 000, -2.0 = 1 1000 000, 0.5 = 0 0110 000, 448 = 0 1111 110
    codes = [0x38, 0xC0, 0x30, 0x7E]
    x = np.array([[1.0, -2.0, 0.5, 448.0], [0.0, 0.0, 0.0, 1.0]], np.float32)
    p = dt.static_cast(x, dt.float8_e4m3fn_x4)
    assert p.shape == (2, 1) and p.dtype == dt.float8_e4m3fn_x4
    assert p.view(np.uint32)[0, 0] == _word(codes, 8) == 0x7E30C038
    assert p.view(np.uint32)[1, 0] == 0x38 << 24
    back = dt.static_cast(p, np.float32)
    assert back.shape == (2, 4) and back.dtype == np.float32
    np.testing.assert_array_equal(back, x)


def test_fp8_e5m2_x4_and_fp4_x4_words():
    # e5m2 (bias 15): 1.0 = 0 01111 00, -0.25 = 1 01101 00, 57344 = 0 11110 11, 0 = 0
    p = dt.static_cast(np.array([1.0, -0.25, 57344.0, 0.0], np.float32), dt.float8_e5m2_x4)
    assert p.view(np.uint32)[0] == _word([0x3C, 0xB4, 0x7B, 0x00], 8)
    # e2m1 (bias 1): 0.5 = 0 00 1, 6.0 = 0 11 1, -1.0 = 1 01 0, 3.0 = 0 10 1; a 16-bit word
    q = dt.static_cast(np.array([[0.5, 6.0, -1.0, 3.0]], np.float32), dt.float4_e2m1fn_x4)
    assert q.dtype.itemsize == 2 and q.shape == (1, 1)
    assert q.view(np.uint16)[0, 0] == _word([0x1, 0x7, 0xA, 0x5], 4) == 0x5A71


def test_pack_rounds_to_nearest_even():
    # e4m3fn has 3 mantissa bits: 1.0625 lies halfway between 1.0 (mantissa 000) and 1.125 (001):
    # even -> 1.0; 1.1875 halfway between 1.125 (001) and 1.25 (010): even -> 1.25 (0x3A)
    p = dt.static_cast(np.array([1.0625, 1.1875, 1.0, 1.0], np.float32), dt.float8_e4m3fn_x4)
    assert p.view(np.uint32)[0] == _word([0x38, 0x3A, 0x38, 0x38], 8)


def test_value_casts_round_to_nearest_even_and_take_dtype_keyword():
    # bf16 keeps 7 mantissa bits (ulp 2^-7 at 1): 1 + 2^-8 is a tie -> 1.0 (even), 1 + 3 * 2^-8 is a
    # tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float64)
    got = dt.static_cast(x, dtype=dt.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2 ** -6]
    m = dt.static_cast(np.array([True, False]), dtype=np.uint8)
    assert m.dtype == np.uint8 and m.tolist() == [1, 0]


def test_sizes_finfo_and_float_kinds():
    assert [dt.sizeinbytes(d) for d in (dt.float8_e4m3fn_x4, dt.float8_e5m2_x4,
                                        dt.float4_e2m1fn_x4, dt.bfloat16, np.float32,
                                        dt.float8_e4m3, "bfloat16")] == [4, 4, 2, 2, 4, 1, 2]
    assert dt.finfo(dt.bfloat16).dtype == np.zeros(1, dt.bfloat16).dtype
    # largest finite: e4m3fn 1.75 * 2^8 = 448; NKI's float8_e4m3 (IEEE-like, bias 7) 1.875 * 2^7 = 240
    assert float(dt.finfo(dt.float8_e4m3fn).max) == 448.0
    assert float(dt.finfo(dt.float8_e4m3).max) == 240.0
    assert [dt.is_float_type(d) for d in (dt.bfloat16, dt.float8_e5m2, np.float32, np.int32,
                                          np.uint8, dt.float8_e4m3fn_x4)] == \
        [True, True, True, False, False, False]


def test_dtype_objects_are_nki_languages_own():
    # the NKI library maps {nl.float8_e4m3fn_x4: dt.float8_e4m3fn_x4, ...} and compares dtypes
    assert dt.float8_e4m3fn_x4 is nl.float8_e4m3fn_x4
    assert dt.float4_e2m1fn_x4 is nl.float4_e2m1fn_x4
    assert np.array([1.0, 2.0]).astype(dt.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("call, rule", [
    (lambda: dt.static_cast(np.ones(3, np.float32), "float7"), "dtype-unknown"),
    (lambda: dt.static_cast(np.ones(6, np.float32), dt.float8_e4m3fn_x4), "mx-pack-shape"),
    (lambda: dt.finfo(dt.float8_e4m3fn_x4), "finfo-packed"),
])
def test_bad_input_names_rule_and_value(call, rule):
    with pytest.raises(TrnsimError) as e:
        call()
    assert e.value.rule == rule and e.value.value is not None


def test_install_and_trnsim_exec_serve_the_name():
    trnsim.compat.install()
    import neuron_dtypes
    assert neuron_dtypes is dt
    code = ("import neuron_dtypes as d, numpy as np; "
            "print(d.__name__, hex(int(d.static_cast(np.array([1.0, -2.0, 0.5, 448.0], "
            "np.float32), d.float8_e4m3fn_x4).view(np.uint32)[0])))")
    out = subprocess.run([sys.executable, "-c", code], env=trnsim.compat.shim_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["trnsim.compat.neuron_dtypes", "0x7e30c038"]
