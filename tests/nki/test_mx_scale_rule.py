"""QuantizeMX block-scale rule (numerics.toml [mx] quantize_scale), checked against exponent
arithmetic written out here.

ocp_x2 (default; NKI 0.5.0 / Neuron 2.31 docstring): X = 2^(floor(log2 amax) - (Emax - 1)).
ocp (OCP MX v1.0 sample algorithm, Neuron <= 2.30, the NKI library's golden):
X = 2^(floor(log2 amax) - Emax), values past the format's max saturate.
Emax = 8 for float8_e4m3fn (max 448 = 1.75 * 2^8), 15 for float8_e5m2 (max 57344 = 1.75 * 2^15).
"""
import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import ConfigError, HardwareFileError
from trnsim.hardware.catalog import load_catalog
from trnsim.nki.core import alloc
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.conventions import PRESETS
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, mx, mx_format
from trnsim.options import Options

E4 = np.dtype(ml_dtypes.float8_e4m3fn)
E5 = np.dtype(ml_dtypes.float8_e5m2)
NEW = PRESETS["new"]


def _nd(shape, dtype, buf):
    return alloc.ndarray(tuple(shape), dtype, buf, conv=NEW)


def _kernel(out_dt):
    def k(x):
        s = _nd((32, 4), x.dtype, alloc.sbuf)
        dma.copy(s, x)
        d = _nd((32, 1), out_dt, alloc.sbuf)
        sc = _nd((4, 1), dt.uint8, alloc.sbuf)
        mx.quantize_mx(d, s, sc)
        od = _nd((32, 1), out_dt, alloc.shared_hbm)
        dma.copy(od, d)
        os_ = _nd((4, 1), dt.uint8, alloc.shared_hbm)
        dma.copy(os_, sc)
        return od, os_
    return k


def _hw(tmp_path, rule):
    if rule == "ocp_x2":
        return None  # the built-in default
    p = tmp_path / f"mx_{rule}.toml"
    p.write_text(f'[numerics.mx]\nquantize_scale = {{ value = "{rule}", source = "choice: test" }}\n')
    return str(p)


def _quantize(tmp_path, rule, group, out_dt=dt.float8_e4m3fn_x4, elem=E4):
    """(scale byte, 4 decoded fp8 values of partition 0) for 4 values placed in the first scaling
    group of a [32, 4] fp16 tile (the other 28 values of the group are 0)."""
    x = np.zeros((32, 4), np.float16)
    x[0, :] = group
    words, sc = Kernel(_kernel(out_dt), api="new").run(
        x, options=Options(target="trn3", hardware_file=_hw(tmp_path, rule))).outputs
    vals = np.ascontiguousarray(np.asarray(words)[0]).view(np.uint32).view(elem).astype(np.float64)
    return int(np.asarray(sc)[0, 0]), vals


def test_default_rule_is_the_current_docs():
    assert load_catalog().numerics["mx"]["quantize_scale"] == "ocp_x2"


@pytest.mark.parametrize("rule,byte,elems", [
    # amax 6.0 = 1.5 * 2^2, floor(log2 6.0) = 2.
    # ocp_x2: 2 - (8 - 1) = -5 -> byte 127 - 5 = 122, X = 1/32: 6 * 32 = 192 (= 1.5 * 2^7, exact);
    #   0.1 * 32 = 3.2 = 1.6 * 2^1 -> nearest 3-bit mantissa 1.625 -> 3.25; 1.0 * 32 = 32; -2 -> -64
    ("ocp_x2", 122, [192.0, 3.25, 32.0, -64.0]),
    # ocp: 2 - 8 = -6 -> byte 121, X = 1/64: 6 * 64 = 384 (= 1.5 * 2^8 <= 448);
    #   0.1 * 64 = 6.4 = 1.6 * 2^2 -> 1.625 * 4 = 6.5; 1.0 -> 64; -2 -> -128
    ("ocp", 121, [384.0, 6.5, 64.0, -128.0]),
])
def test_amax_6_e4m3fn(tmp_path, rule, byte, elems):
    # fp16(0.1) = 0.0999755859375: x32 = 3.19921875, x64 = 6.3984375 -- same nearest fp8 values
    got_byte, got = _quantize(tmp_path, rule, [6.0, 0.1, 1.0, -2.0])
    assert got_byte == byte
    assert got.tolist() == elems
    # dequantized: element * 2^(byte - 127); 6.0 and the powers of two come back exactly
    deq = np.array(elems) * 2.0 ** (byte - 127)
    assert deq[0] == 6.0 and deq[2] == 1.0 and deq[3] == -2.0


@pytest.mark.parametrize("rule,out_dt,elem,byte,top", [
    # amax 7.5 = 1.875 * 2^2.  e4m3fn, ocp: X = 2^(2 - 8), 7.5 * 64 = 480 > 448 -> saturates to 448
    ("ocp", dt.float8_e4m3fn_x4, E4, 121, 448.0),
    # ocp_x2: X = 2^(2 - 7), 7.5 * 32 = 240 = 1.875 * 2^7 (1.111b, exact in e4m3fn)
    ("ocp_x2", dt.float8_e4m3fn_x4, E4, 122, 240.0),
    # e5m2, ocp: X = 2^(2 - 15), 7.5 * 8192 = 61440 > 57344 -> saturates to 57344
    ("ocp", dt.float8_e5m2_x4, E5, 127 - 13, 57344.0),
    # ocp_x2: X = 2^(2 - 14), 7.5 * 4096 = 30720 = 1.875 * 2^14: halfway between 1.75 and 2.0 with
    # a 2-bit mantissa, ties to even -> 2.0 * 2^14 = 32768 (rounds up, as the docs intend)
    ("ocp_x2", dt.float8_e5m2_x4, E5, 127 - 12, 32768.0),
])
def test_largest_value_saturates_only_under_ocp(tmp_path, rule, out_dt, elem, byte, top):
    got_byte, got = _quantize(tmp_path, rule, [7.5, -7.5, 0.0, 0.0], out_dt, elem)
    assert got_byte == byte
    assert got.tolist() == [top, -top, 0.0, 0.0]


@pytest.mark.parametrize("rule", ["ocp", "ocp_x2"])
def test_zero_group_scale_is_2_pow_minus_127(tmp_path, rule):
    got_byte, got = _quantize(tmp_path, rule, [0.0, 0.0, 0.0, 0.0])
    assert got_byte == 0 and got.tolist() == [0.0] * 4


def test_host_helper_follows_the_rule():
    x = np.zeros((8, 4))
    x[3, 1] = -6.0
    assert mx.quantize_block_scales(x, E4).tolist() == [[122]]
    assert mx.quantize_block_scales(x, E4, rule="ocp").tolist() == [[121]]
    assert mx.quantize_block_scales(x, E5, rule="ocp").tolist() == [[127 + 2 - 15]]
    with pytest.raises(ConfigError) as e:
        mx.quantize_block_scales(x, E4, rule="emax")
    assert e.value.rule == "mx-scale-rule" and e.value.value == "emax"


def test_unknown_rule_in_a_hardware_file_is_refused(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('[numerics.mx]\nquantize_scale = { value = "ocp_x4", source = "choice: test" }\n')
    with pytest.raises(HardwareFileError) as e:
        load_catalog(str(p))
    assert e.value.rule == "hardware-file-range" and e.value.value == "ocp_x4"


def test_shipped_example_selects_ocp():
    import os
    from trnsim.hardware.loader import DATA_DIR
    ex = os.path.join(os.path.dirname(DATA_DIR), "examples", "mx-scale-neuron-2.30.toml")
    assert load_catalog(ex).numerics["mx"]["quantize_scale"] == "ocp"
    # binades above the OCP scale: the doc's "two times larger" is one binade
    assert mx_format.SCALE_RULES == {"ocp": 0, "ocp_x2": 1}
