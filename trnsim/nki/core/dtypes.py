"""NKI data types as numpy dtypes, and the conversions the engines perform on every write.

Low-precision floats come from ml_dtypes. NKI's ``float8_e4m3`` (range +-240, with inf) is
``ml_dtypes.float8_e4m3``, not ``float8_e4m3fn`` (+-448); both exist and differ.
``tfloat32`` and the x4-packed MX types get distinct structured dtypes so that they compare unequal
to fp32 / uint32 while their storage stays 4 (or 2) bytes per element.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import ml_dtypes
import numpy as np

from ...errors import DtypeError

bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e3m4 = np.dtype(ml_dtypes.float8_e3m4)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float64 = np.dtype(np.float64)
bool_ = np.dtype(np.bool_)
# distinct container types: equal storage width, unequal identity
tfloat32 = np.dtype([("tfloat32", "<f4")])
float8_e5m2_x4 = np.dtype([("float8_e5m2_x4", "<u4")])
float8_e4m3fn_x4 = np.dtype([("float8_e4m3fn_x4", "<u4")])
float4_e2m1fn_x4 = np.dtype([("float4_e2m1fn_x4", "<u2")])

NAMES: Dict[np.dtype, str] = {
    bfloat16: "bfloat16", float16: "float16", float32: "float32", float64: "float64",
    float8_e4m3: "float8_e4m3", float8_e5m2: "float8_e5m2", float8_e3m4: "float8_e3m4",
    float8_e4m3fn: "float8_e4m3fn", float8_e8m0fnu: "float8_e8m0fnu",
    int8: "int8", int16: "int16", int32: "int32", int64: "int64",
    uint8: "uint8", uint16: "uint16", uint32: "uint32", uint64: "uint64", bool_: "bool",
    tfloat32: "tfloat32", float8_e5m2_x4: "float8_e5m2_x4",
    float8_e4m3fn_x4: "float8_e4m3fn_x4", float4_e2m1fn_x4: "float4_e2m1fn_x4",
}
BY_NAME: Dict[str, np.dtype] = {v: k for k, v in NAMES.items()}
BY_NAME.update({"bool_": bool_, "bf16": bfloat16, "fp16": float16, "fp32": float32, "fp8": float8_e4m3,
                "float": float32, "half": float16, "fp8_e4m3": float8_e4m3, "fp8_e5m2": float8_e5m2,
                "tf32": tfloat32})

PACKED_BASE = {tfloat32: float32, float8_e5m2_x4: uint32, float8_e4m3fn_x4: uint32,
               float4_e2m1fn_x4: uint16}
LOW_PRECISION_FLOATS = frozenset([bfloat16, float16, float8_e4m3, float8_e5m2, float8_e3m4,
                                  float8_e4m3fn, float8_e8m0fnu])
FP8 = frozenset([float8_e4m3, float8_e5m2, float8_e3m4, float8_e4m3fn])

_cache: Dict[Any, np.dtype] = {}


def as_dtype(x: Any, what: str = "dtype") -> np.dtype:
    """Canonical numpy dtype for anything a kernel may pass as a dtype (np type, string, torch)."""
    try:
        return _cache[x]
    except (KeyError, TypeError):
        pass
    dt = _resolve(x, what)
    try:
        _cache[x] = dt
    except TypeError:
        pass
    return dt


def _resolve(x: Any, what: str) -> np.dtype:
    if isinstance(x, np.dtype):
        if x in NAMES:
            return x
        if x.fields is None and x.kind in "biuf":
            return x
    if isinstance(x, str):
        key = x.strip().lower().replace("nl.", "").replace("np.", "")
        if key in BY_NAME:
            return BY_NAME[key]
    mod = type(x).__module__
    if mod.startswith("torch"):
        name = str(x).replace("torch.", "")
        table = {"float32": float32, "float": float32, "float16": float16, "half": float16,
                 "bfloat16": bfloat16, "int32": int32, "int64": int64, "int8": int8, "uint8": uint8,
                 "int16": int16, "bool": bool_, "float8_e4m3fn": float8_e4m3fn,
                 "float8_e5m2": float8_e5m2, "float64": float64}
        if name in table:
            return table[name]
    try:
        dt = np.dtype(x)
    except Exception:
        raise DtypeError(f"{what} {x!r} is not a data type NKI knows", rule="dtype-unknown",
                         limit=sorted(set(NAMES.values())), value=repr(x)) from None
    if dt in NAMES or (dt.fields is None and dt.kind in "biuf"):
        return dt
    raise DtypeError(f"{what} {x!r} is not a data type NKI knows", rule="dtype-unknown",
                     limit=sorted(set(NAMES.values())), value=repr(x))


def name(dt: np.dtype) -> str:
    """The NKI name of a dtype (bfloat16, float8_e4m3, ...)."""
    return NAMES.get(dt) or str(dt)


def storage_dtype(dt: np.dtype, precise: bool = True) -> np.dtype:
    """The numpy dtype the simulator stores a tensor of NKI dtype ``dt`` in."""
    base = PACKED_BASE.get(dt)
    if base is not None:
        return base
    if not precise and dt in LOW_PRECISION_FLOATS:
        return float32  # NKI_PRECISE_FP=0: the official simulator keeps low precision in fp32
    return dt


def itemsize(dt: np.dtype) -> int:
    """Bytes per element of an NKI dtype."""
    return dt.itemsize


def is_float(dt: np.dtype) -> bool:
    """True for floating-point dtypes (low-precision ones included)."""
    return dt.kind == "f" or dt in LOW_PRECISION_FLOATS or dt is tfloat32


def is_int(dt: np.dtype) -> bool:
    """True for integer dtypes (bool included)."""
    return dt.kind in "iub" and dt.fields is None


def is_packed(dt: np.dtype) -> bool:
    """True for the x4-packed MX dtypes."""
    return dt in PACKED_BASE and dt is not tfloat32


def finfo(dt: Any):
    """Limits of a float dtype, ml_dtypes types included (``nl.finfo``)."""
    d = as_dtype(dt)
    if d == tfloat32:
        d = float32
    if d in LOW_PRECISION_FLOATS:
        return ml_dtypes.finfo(d)
    if d.kind in "iu":
        return np.iinfo(d)
    return np.finfo(d)


# ---------------------------------------------------------------------------------------------------
# Conversion on write.  Engines compute in fp32 and cast on the way out; DMA casts through fp32.

class Converter:
    """Casts computed values into a destination dtype the way the hardware does. Float -> float:
    round to nearest even (ml_dtypes) or stochastic rounding when enabled. Float -> int: per
    ``numerics.toml`` (round-to-nearest-even and saturation by default; NaN -> 0)."""

    def __init__(self, *, precise: bool = True, stochastic: bool = False, seed: int = 0,
                 float_to_int_rounding: str = "rne", float_to_int_overflow: str = "saturate"):
        self.precise = precise
        self.stochastic = stochastic
        self.rng = np.random.default_rng(seed)
        self.f2i_round = float_to_int_rounding
        self.f2i_saturate = float_to_int_overflow == "saturate"

    def __call__(self, values: np.ndarray, dst: np.ndarray.dtype) -> np.ndarray:
        """Values (any numeric dtype) converted to the storage of NKI dtype ``dst``."""
        sd = storage_dtype(dst, self.precise)
        src = values.dtype
        if src == sd and dst is not tfloat32:
            return values
        if dst == tfloat32:
            return round_tf32(np.asarray(values, dtype=np.float32))
        if dst.fields is not None:  # packed MX containers hold raw bits
            return values.astype(sd)
        if sd.kind in "iub":
            return self._to_int(values, sd)
        if src.kind in "iub":
            values = values.astype(np.float32)  # ints reach low-precision floats via fp32
        if self.stochastic and sd in LOW_PRECISION_FLOATS:
            return stochastic_round(values.astype(np.float32, copy=False), sd, self.rng)
        return values.astype(sd)

    def _to_int(self, values: np.ndarray, sd: np.dtype) -> np.ndarray:
        if sd == bool_:
            return values != 0
        if values.dtype.kind == "f" or values.dtype in LOW_PRECISION_FLOATS:
            v = values.astype(np.float64)
            v = np.rint(v) if self.f2i_round == "rne" else np.trunc(v)
            v = np.nan_to_num(v, nan=0.0)
        else:
            v = values
        if self.f2i_saturate:
            info = np.iinfo(sd)
            v = np.clip(v, info.min, info.max)
        return v.astype(sd)


def round_tf32(v: np.ndarray) -> np.ndarray:
    """Round fp32 to tf32 (10 explicit mantissa bits), nearest even; stored as fp32."""
    b = v.view(np.uint32)
    finite = (b & 0x7F800000) != 0x7F800000
    lsb = (b >> 13) & 1
    r = ((b + 0x0FFF + lsb) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(finite, r, b).view(np.float32)


def stochastic_round(v: np.ndarray, dst: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Round fp32 ``v`` to ``dst``, picking the neighbour above with probability (v - lo) / (hi - lo)."""
    near = v.astype(dst)
    if dst == float8_e8m0fnu:
        return near
    back = near.astype(np.float32)
    bits_t = np.uint16 if dst.itemsize == 2 else np.uint8
    signmask = bits_t(1 << (8 * dst.itemsize - 1))
    nb = near.view(bits_t)
    neg = (nb & signmask) != 0
    zero = (nb & ~signmask) == 0
    up = np.where(neg, np.where(zero, bits_t(1), nb - bits_t(1)), nb + bits_t(1)).astype(bits_t)
    down = np.where(neg, nb + bits_t(1), np.where(zero, signmask | bits_t(1), nb - bits_t(1))).astype(bits_t)
    other = np.where(back < v, up, down).astype(bits_t).view(dst).astype(np.float32)
    lo = np.minimum(back, other)
    hi = np.maximum(back, other)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        p_hi = np.where(span > 0, (v - lo) / span, 0.0)
    pick_hi = rng.random(v.shape, dtype=np.float32) < p_hi
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf lanes are replaced below
        res = np.where(pick_hi, hi, lo).astype(dst)
    keep = (back == v) | ~np.isfinite(v) | ~np.isfinite(other) | ~np.isfinite(back)
    return np.where(keep, near, res)


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """NKI promotion for two tensor dtypes (nki-api.md 3.8)."""
    if a == b:
        return a
    fa, fb = not is_int(a), not is_int(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        pair = {a, b}
        if pair == {float16, bfloat16}:
            return float32
        if a in FP8 and b in FP8:
            return bfloat16
        if a in FP8:
            return b
        if b in FP8:
            return a
        if tfloat32 in pair or float32 in pair:
            return float32
        return a if a.itemsize >= b.itemsize else b
    # two integers
    if a == bool_:
        return b
    if b == bool_:
        return a
    sa, sb = a.kind == "i", b.kind == "i"
    if sa == sb:
        return a if a.itemsize >= b.itemsize else b
    s, u = (a, b) if sa else (b, a)
    if s.itemsize > u.itemsize:
        return s
    if u == uint32 or s.itemsize >= 4:
        return float32
    return {1: int16, 2: int32}[u.itemsize]


def scalar_dtype(x: Any) -> np.dtype:
    """Weak Python scalars count as int32 / float32 / uint8 (bool) in promotion; a typed numpy
    scalar (``np.float16(2)``, ``np.int8(3)``, ``ml_dtypes.bfloat16(1)``) keeps its dtype."""
    # legacy docs ('Weakly Typed Scalar Type Inference'): "explicitly set the datatype of the
    # scalar, like np.int8(2)" to keep a narrow result.  64-bit numpy scalars (np.sqrt of a
    # Python number, np.prod of a shape) stay weak: NKI has no 64-bit types.
    if isinstance(x, np.generic) and not isinstance(x, (np.float64, np.int64, np.uint64,
                                                        np.bool_)):
        d = np.dtype(type(x))
        if d in NAMES:
            return d
    if isinstance(x, (bool, np.bool_)):
        return uint8
    if isinstance(x, (int, np.integer)):
        return int32
    return float32
