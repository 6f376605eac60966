"""The MX (microscaling) formats of NeuronCore-v4 on the host: x4-packed fp8/fp4 elements, e8m0
scales and their quadrant layout, exact (de)quantization.  Pure numpy; the layouts and numerics are
described in ``mx.py`` (sources [ISA] [MX] [ARCH4] there)."""
from __future__ import annotations

from typing import Any, Tuple

import ml_dtypes
import numpy as np

from ...errors import ConfigError, DtypeError, ShapeError
from ..core import dtypes as dt

# -- dtype tables --------------------------------------------------------------------------------

MX_DATA = (dt.float8_e5m2_x4, dt.float8_e4m3fn_x4, dt.float4_e2m1fn_x4)
MXFP8_DATA = (dt.float8_e5m2_x4, dt.float8_e4m3fn_x4)
SCALE_DTYPES = (dt.uint8, dt.float8_e8m0fnu)

#: NKI x4 container -> the ml_dtypes element type it packs
ELEMENT = {
    dt.float8_e5m2_x4: np.dtype(ml_dtypes.float8_e5m2),
    dt.float8_e4m3fn_x4: np.dtype(ml_dtypes.float8_e4m3fn),
    dt.float4_e2m1fn_x4: np.dtype(ml_dtypes.float4_e2m1fn),
}
#: ml_dtypes element type -> NKI x4 container
CONTAINER = {v: k for k, v in ELEMENT.items()}
#: largest unbiased exponent of a normal value: ``Emax`` of the [ISA] quantize rule
EMAX = {np.dtype(ml_dtypes.float8_e4m3fn): 8, np.dtype(ml_dtypes.float8_e5m2): 15,
        np.dtype(ml_dtypes.float4_e2m1fn): 2}
#: QuantizeMX block-scale rules (``numerics.toml`` ``[mx] quantize_scale``) -> how many binades
#: above the OCP scale the block scale sits: ``ocp`` is the OCP MX v1.0 sample algorithm,
#: ``X = 2^(floor(log2 amax) - Emax)`` (Neuron <= 2.30); ``ocp_x2`` is the NKI 0.5.0 (Neuron 2.31)
#: rule ``X = 2^(floor(log2 amax) - (Emax - 1))``, "a block scale two times larger" [ISA].
SCALE_RULES = {"ocp": 0, "ocp_x2": 1}

GROUP_PARTITIONS = 8       # a scaling group spans 8 partitions ...
PACK = 4                   # ... x the 4 values of one x4 element = 32 values
QUADRANT = 32              # partitions per SBUF quadrant
SCALE_ROWS_PER_QUADRANT = QUADRANT // GROUP_PARTITIONS  # 4
SCALE_OFFSETS = (0, 4, 8, 12)  # allowed start partitions of a scale view inside its quadrant
SCALE_BIAS = 127

_LUT_CACHE: dict = {}


def _lut(elem: np.dtype) -> np.ndarray:
    """float64 value of every bit pattern of an fp8 (256 entries) or fp4 (16 entries) type."""
    lut = _LUT_CACHE.get(elem)
    if lut is None:
        n = 16 if elem == np.dtype(ml_dtypes.float4_e2m1fn) else 256
        lut = np.arange(n, dtype=np.uint8).view(elem).astype(np.float64)
        lut.flags.writeable = False
        _LUT_CACHE[elem] = lut
    return lut


def _bits(elem: np.dtype) -> int:
    return 4 if elem == np.dtype(ml_dtypes.float4_e2m1fn) else 8


def _element_dtype(d: Any) -> np.dtype:
    """The ml_dtypes element type for an element type, an x4 container or a name."""
    if isinstance(d, str):
        key = d.strip().lower().replace("nl.", "").replace("ml_dtypes.", "").replace("mld.", "")
        if key.endswith("_x4"):
            d = dt.as_dtype(key)
        else:
            try:
                d = np.dtype(getattr(ml_dtypes, key))
            except AttributeError:
                raise DtypeError(f"{d!r} is not an MX element type", rule="mx-element-dtype",
                                 limit="float8_e4m3fn, float8_e5m2, float4_e2m1fn",
                                 value=d) from None
    d = np.dtype(d) if not isinstance(d, np.dtype) else d
    if d in ELEMENT:
        return ELEMENT[d]
    if d in CONTAINER:
        return d
    raise DtypeError(f"{d} is not an MX element type", rule="mx-element-dtype",
                     limit="float8_e4m3fn, float8_e5m2, float4_e2m1fn (or their _x4 containers)",
                     value=str(d))


# -- host helpers --------------------------------------------------------------------------------

def pack_x4(values, dtype=None) -> np.ndarray:
    """Pack groups of 4 consecutive values of the last axis into x4 words (host side). ``values``
    is an ``ml_dtypes`` float8_e4m3fn / float8_e5m2 / float4_e2m1fn array, or any float array
    together with ``dtype`` (then rounded to it, nearest even)."""
    # Returns uint32 words (fp8) or uint16 words (fp4) with the last axis 4x shorter -- what a
    # kernel receives for an x4 input and ``.view(nl.float8_e4m3fn_x4)`` (etc.) reinterprets. Value
    # ``j`` of a group goes to byte / nibble ``j``, least significant first.
    a = np.asarray(values)
    if dtype is not None:
        elem = _element_dtype(dtype)
        if a.dtype != elem:
            a = a.astype(np.float32).astype(elem) if a.dtype.kind in "fiub" or \
                a.dtype in dt.LOW_PRECISION_FLOATS else a.astype(elem)
    else:
        elem = _element_dtype(a.dtype)
    if a.ndim == 0 or a.shape[-1] % PACK:
        raise ShapeError(f"pack_x4 needs a last axis that is a multiple of {PACK}, got shape "
                         f"{a.shape}",
                         rule="mx-pack-shape", limit=f"multiple of {PACK}", value=a.shape)
    raw = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[:-1] + (a.shape[-1] // PACK, PACK))
    bits = _bits(elem)
    wt = np.uint16 if bits == 4 else np.uint32
    mask = (1 << bits) - 1
    out = np.zeros(raw.shape[:-1], dtype=wt)
    for j in range(PACK):
        out |= (raw[..., j].astype(wt) & wt(mask)) << wt(bits * j)
    return out


def _words(packed: np.ndarray) -> np.ndarray:
    a = np.asarray(packed)
    if a.dtype.fields is not None:  # an NKI structured container
        a = a.view(dt.PACKED_BASE[a.dtype]) if a.dtype in dt.PACKED_BASE else a
    return a


def _unpack_codes(packed: np.ndarray, elem: np.dtype) -> np.ndarray:
    """Bit codes (uint8), shape ``packed.shape[:-1] + (F, 4)``."""
    a = _words(packed)
    bits = _bits(elem)
    want = np.uint16 if bits == 4 else np.uint32
    if a.dtype == np.uint8 and bits == 4:  # the docs' host mimicry: 2 fp4 per byte
        if a.shape[-1] % 2:
            raise ShapeError("fp4 bytes hold 2 values; an x4 word needs an even number of bytes",
                             rule="mx-pack-shape", value=a.shape)
        a = (a[..., 0::2].astype(np.uint16) | (a[..., 1::2].astype(np.uint16) << np.uint16(8)))
    elif a.dtype == np.uint8 and bits == 8:
        if a.shape[-1] % 4:
            raise ShapeError("fp8 x4 words are 4 bytes; the last axis must be a multiple of 4",
                             rule="mx-pack-shape", value=a.shape)
        a = np.ascontiguousarray(a).view("<u4")
    if a.dtype != want:
        raise DtypeError(f"{elem} x4 words are {np.dtype(want)}, got {a.dtype}",
                         rule="mx-pack-dtype", limit=str(np.dtype(want)), value=str(a.dtype))
    mask = (1 << bits) - 1
    shifts = np.arange(PACK, dtype=a.dtype) * a.dtype.type(bits)
    return ((a[..., None] >> shifts) & a.dtype.type(mask)).astype(np.uint8)


def unpack_x4(packed, dtype) -> np.ndarray:
    """Inverse of :func:`pack_x4`: x4 words (uint32 for fp8, uint16 or 2-per-byte uint8 for fp4)
    -> ``ml_dtypes`` array of ``dtype`` (element type or x4 container), last axis 4x longer."""
    elem = _element_dtype(dtype)
    codes = _unpack_codes(packed, elem)
    return codes.reshape(codes.shape[:-2] + (codes.shape[-2] * PACK,)).view(elem)


def static_cast_x4(values, dtype) -> np.ndarray:
    """Host ``static_cast`` where either side is an x4 MX container: packing takes the last axis
    ``[.., 4n] -> [.., n]`` (elements rounded to nearest even first), unpacking the reverse."""
    # The NKI library's goldens rely on both directions: static_cast(fp8 [H, 4N], float8_e4m3fn_x4)
    # gives [H, N] x4 words, static_cast(x4 [P, F], float32) gives [P, 4F] values.
    a = np.asarray(values)
    dst = dt.as_dtype(dtype)
    if dt.is_packed(a.dtype):
        if a.dtype == dst:
            return a.copy()
        a = unpack_x4(a, a.dtype)
        if not dt.is_packed(dst):
            return a.copy() if a.dtype == dst else a.astype(np.float32).astype(dst)
    if a.dtype == dt.tfloat32:
        a = a.view(np.float32)
    # integers and bools are values here (a value cast), not ready-made words: words take .view()
    return pack_x4(a, dst).view(dst)


def scale_rows(data_partitions: int, offset: int = 0) -> np.ndarray:
    """Row of the scale view holding the scales of each 8-partition group of an MX data tile."""
    b = np.arange(data_partitions // GROUP_PARTITIONS)
    return offset + QUADRANT * (b // SCALE_ROWS_PER_QUADRANT) + b % SCALE_ROWS_PER_QUADRANT


def scatter_scales(scales, data_partitions: int, offset: int = 0) -> np.ndarray:
    """Contiguous scales ``[P // 8, F]`` -> the SBUF scale layout ``nc_matmul_mx`` reads (host):
    ``[P, F]`` (``P > 32``) or ``[offset + 4, F]`` (``P == 32``), unused rows zero."""
    s = np.asarray(scales)
    P = int(data_partitions)
    if P % QUADRANT or P <= 0:
        raise ShapeError(f"MX data partitions must be a multiple of {QUADRANT}",
                         rule="mx-partition-multiple", limit=f"multiple of {QUADRANT}", value=P)
    if s.shape[0] != P // GROUP_PARTITIONS:
        raise ShapeError(f"expected {P // GROUP_PARTITIONS} scale rows for {P} data partitions, "
                         f"got {s.shape[0]}", rule="mx-scale-shape", limit=P // GROUP_PARTITIONS,
                         value=s.shape[0])
    rows = P if P > QUADRANT else offset + SCALE_ROWS_PER_QUADRANT
    out = np.zeros((max(rows, offset + SCALE_ROWS_PER_QUADRANT),) + s.shape[1:], dtype=s.dtype)
    out[scale_rows(P, offset)] = s
    return out


def gather_scales(hw_scales, data_partitions: int, offset: int = 0) -> np.ndarray:
    """Inverse of :func:`scatter_scales`: SBUF scale layout -> contiguous ``[P // 8, F]``."""
    return np.asarray(hw_scales)[scale_rows(int(data_partitions), offset)]


def scale_factors(scales) -> np.ndarray:
    """float64 ``2^(s - 127)`` for uint8 / float8_e8m0fnu scales (0xFF -> NaN, as OCP E8M0)."""
    s = np.asarray(scales)
    if s.dtype == dt.float8_e8m0fnu:
        return s.astype(np.float64)
    if s.dtype == np.uint8:
        out = np.ldexp(1.0, s.astype(np.int64) - SCALE_BIAS)
        return np.where(s == 0xFF, np.nan, out)
    # NKI_PRECISE_FP=0 keeps float8_e8m0fnu tensors as fp32 values
    return s.astype(np.float64)


def dequantize_x4(packed, dtype, scales) -> np.ndarray:
    """Host dequantization: x4 words ``[P, F]`` and contiguous scales ``[P // 8, F]`` -> float64
    ``[P, 4F]`` (value ``j`` of word ``[p, f]`` at column ``4f + j``)."""
    elem = _element_dtype(dtype)
    vals = _lut(elem)[_unpack_codes(packed, elem)]           # [P, F, 4]
    f = np.repeat(scale_factors(scales), GROUP_PARTITIONS, axis=0)  # [P, F]
    vals = vals * f[..., None]
    return vals.reshape(vals.shape[:-2] + (vals.shape[-2] * PACK,))


def quantize_block_scales(values, dtype, rule: str | None = None) -> np.ndarray:
    """The QuantizeMX block scale (biased uint8) of each 8 x 4 group of ``values [P, 4F]`` under
    scale ``rule`` (a key of :data:`SCALE_RULES`; None: the catalog's ``numerics.toml`` rule)."""
    if rule is None:
        from ...hardware import load_catalog
        rule = load_catalog().numerics["mx"]["quantize_scale"]
    elem = _element_dtype(dtype)
    v = np.asarray(values, dtype=np.float64)
    P, F4 = v.shape
    blocks = np.abs(v).reshape(P // GROUP_PARTITIONS, GROUP_PARTITIONS, F4 // PACK, PACK)
    return _scale_from_amax(blocks.max(axis=(1, 3)), EMAX[elem], rule)[0]


def scale_rule_shift(rule: str) -> int:
    """Binades the block scale of ``rule`` sits above the OCP one; unknown names are refused."""
    if rule not in SCALE_RULES:
        raise ConfigError(f"unknown QuantizeMX scale rule {rule!r}", rule="mx-scale-rule",
                          limit=sorted(SCALE_RULES), value=rule,
                          hint="numerics.toml [mx] quantize_scale")
    return SCALE_RULES[rule]


def _scale_from_amax(amax: np.ndarray, emax: int, rule: str) -> Tuple[np.ndarray, np.ndarray]:
    """(biased uint8 scale, non-finite-group mask) from per-group max |value|."""
    shift = scale_rule_shift(rule)
    bad = ~np.isfinite(amax)
    safe = np.where(bad | (amax == 0), 1.0, amax)
    _, e = np.frexp(safe)                      # safe = m * 2^e, m in [0.5, 1)
    exp = (e - 1) - emax + shift + SCALE_BIAS  # floor(log2 amax) - Emax + shift, biased
    exp = np.where(amax == 0, 0, exp)          # all-zero group: 2^-127
    exp = np.clip(exp, 0, 254)
    exp = np.where(bad, 0xFF, exp)
    return exp.astype(np.uint8), bad
