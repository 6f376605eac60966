"""ALU and activation tables: op tokens -> numpy implementations in the engines' fp32 arithmetic.

Kernels pass operators as tokens: ``nl.add``, ``np.add``, ``nl.max``, ``np.max``, ``nl.exp``,
``np.exp``...  Both families map to one canonical name here (like Triton's interpreter maps builder
names to numpy ufuncs).  Vector/Scalar/GpSimd compute in fp32 [ARCH2]; bitwise ops act on the raw
integer bits.  Activation functions are piecewise polynomials on the hardware; trnsim evaluates
the exact functions in fp32, so results can differ from the chip in the last bits.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict

import numpy as np

from ...errors import UnsupportedError

_TOKENS: Dict[int, str] = {}
_KEEP: list = []  # keeps registered token objects alive so their ids stay unique


def register_token(obj: Any, name: str) -> None:
    """Make the function fn stand for the ALU / activation token name."""
    _TOKENS[id(obj)] = name
    _KEEP.append(obj)


def token_name(op: Any, what: str = "op") -> str:
    """The canonical token of an op argument (a registered function, an enum or a name)."""
    if isinstance(op, str):
        key = op.strip().lower()
        if key in BINARY or key in UNARY or key in REDUCE:
            return key
        key = _ALIASES.get(key, key)
        if key in BINARY or key in UNARY or key in REDUCE:
            return key
    n = _TOKENS.get(id(op))
    if n is None:
        raise UnsupportedError(f"{what} {op!r} is not an operator trnsim knows", rule="alu-op",
                               value=getattr(op, "__name__", repr(op)))
    return n


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def _pow(a, b):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(_f32(a), _f32(b))


def _div(a, b):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.divide(_f32(a), _f32(b), dtype=np.float32)


def _mod(a, b):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.mod(_f32(a), _f32(b))


def _fmod(a, b):
    # nl.fmod: the remainder takes the dividend's sign (C fmod), unlike nl.mod (divisor's sign)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.fmod(_f32(a), _f32(b))


def _bits(x):
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        return x
    if x.dtype == np.float32:
        return x.view(np.int32)
    return x.astype(np.int64)


def _same_width(a, b):
    """Bit patterns of a tile and an immediate in the tile's width: a 64-bit immediate would
    widen the result, and the write would then saturate where the 32-bit ALU wraps."""
    a, b = _bits(a), _bits(b)
    if np.ndim(a) and not np.ndim(b):
        b = np.asarray(b).astype(a.dtype)
    elif np.ndim(b) and not np.ndim(a):
        a = np.asarray(a).astype(b.dtype)
    return a, b


def _bitop(f):
    def g(a, b):
        return f(*_same_width(a, b))
    return g


def _shift_left(a, b):
    a, b = _same_width(a, b)
    return np.left_shift(a, np.asarray(b).astype(a.dtype))  # bits shifted out are dropped


def _shift_right(a, b):
    a = _bits(a)
    return np.right_shift(a, _bits(b))


def _logical_shift_right(a, b):
    # zero-fill within the operand's own width (an 8/16-bit signed value must not be
    # sign-extended to 64 bits first)
    a, b = _same_width(a, b)
    a = np.asarray(a)
    ut = np.dtype(f"u{a.dtype.itemsize}")
    u = a.view(ut) if a.dtype.kind == "i" else a
    return np.right_shift(u, np.asarray(b).astype(ut)).view(a.dtype)


def _cmp(f):
    def g(a, b):
        return f(_f32(a), _f32(b)).astype(np.float32)
    return g


def _lgc(f):
    def g(a, b):
        return f(_f32(a) != 0, _f32(b) != 0).astype(np.float32)
    return g


def _pick_by_magnitude(a, b, wins) -> np.ndarray:
    a, b = _f32(a), _f32(b)
    return np.where(wins(np.abs(a), np.abs(b)), a, b)


BINARY: Dict[str, Callable] = {
    "add": lambda a, b: np.add(_f32(a), _f32(b)),
    "subtract": lambda a, b: np.subtract(_f32(a), _f32(b)),
    "multiply": lambda a, b: np.multiply(_f32(a), _f32(b)),
    "divide": _div,
    "maximum": lambda a, b: np.maximum(_f32(a), _f32(b)),
    "minimum": lambda a, b: np.minimum(_f32(a), _f32(b)),
    "power": _pow,
    "mod": _mod,
    "fmod": _fmod,
    "abs_max": lambda a, b: np.maximum(np.abs(_f32(a)), np.abs(_f32(b))),
    # the trn3 language functions nl.abs_max / nl.abs_min: the signed original of the input with
    # the larger / smaller magnitude, y on ties (docs: nki.language.abs_max, abs_min); the ALU
    # token abs_max given to ISA ops keeps returning the magnitude (the amax idiom of
    # quantization kernels, abs_max(x, 0) = |x|)
    "abs_max_signed": lambda a, b: _pick_by_magnitude(a, b, np.greater),
    "abs_min_signed": lambda a, b: _pick_by_magnitude(a, b, np.less),
    "equal": _cmp(np.equal),
    "not_equal": _cmp(np.not_equal),
    "less": _cmp(np.less),
    "less_equal": _cmp(np.less_equal),
    "greater": _cmp(np.greater),
    "greater_equal": _cmp(np.greater_equal),
    "logical_and": _lgc(np.logical_and),
    "logical_or": _lgc(np.logical_or),
    "logical_xor": _lgc(np.logical_xor),
    "bitwise_and": _bitop(np.bitwise_and),
    "bitwise_or": _bitop(np.bitwise_or),
    "bitwise_xor": _bitop(np.bitwise_xor),
    "left_shift": _shift_left,
    # the ALU table lists nl.right_shift as the *logical* shift right; arithmetic shift right is
    # "not supported" (nki.api.shared.rst), so signed values are zero-filled, not sign-extended
    "right_shift": _logical_shift_right,
    "logical_shift_right": _logical_shift_right,
    "arithmetic_shift_right": _shift_right,
    "rsqrt_mul": lambda a, b: _f32(a) / np.sqrt(_f32(b)),
}
BITVEC = frozenset(["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                    "logical_shift_right", "arithmetic_shift_right"])
TS_UNARY_BITVEC = frozenset(["invert"])  # "Bitwise Not": a unary operator of the bitvec group


def is_bitvec(name) -> bool:
    """True for the ALU's bitvec operators (bitwise and shifts, and bitwise not)."""
    return name in BITVEC or name in TS_UNARY_BITVEC

# reductions over free axes: (numpy reducer, identity for masked-out elements)
REDUCE: Dict[str, tuple] = {
    "add": (np.add, 0.0),
    "multiply": (np.multiply, 1.0),
    "maximum": (np.maximum, -np.inf),
    "minimum": (np.minimum, np.inf),
    "bitwise_or": (np.bitwise_or, 0),
    "bitwise_and": (np.bitwise_and, -1),
    "bitwise_xor": (np.bitwise_xor, 0),
    "logical_or": (np.logical_or, 0),
    "logical_and": (np.logical_and, 1),
    "logical_xor": (np.logical_xor, 0),  # a legal reduction op in the ALU table
    "abs_max": (None, 0.0),
}


def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _gelu(x):
    x = _f32(x).astype(np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    x = _f32(x)
    return 0.5 * x * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    x = _f32(x)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1 + _f32(x) * (1 - s))


def _gelu_dx(x):
    x = _f32(x).astype(np.float64)
    cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def _softplus(x):
    x = _f32(x)
    return np.logaddexp(np.float32(0), x)


def _mish(x):
    x = _f32(x)
    return x * np.tanh(_softplus(x))


def _safe(f):
    def g(x):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return f(_f32(x))
    return g


UNARY: Dict[str, Callable] = {
    "copy": lambda x: _f32(x),
    "identity": lambda x: _f32(x),
    "exp": _safe(np.exp),
    "log": _safe(np.log),
    "sqrt": _safe(np.sqrt),
    "rsqrt": _safe(lambda x: 1.0 / np.sqrt(x)),
    "reciprocal": _safe(lambda x: 1.0 / x),
    "square": _safe(np.square),
    "abs": _safe(np.abs),
    "negative": _safe(np.negative),
    "sign": _safe(np.sign),
    "floor": _safe(np.floor),
    "ceil": _safe(np.ceil),
    "trunc": _safe(np.trunc),
    "sin": _safe(np.sin),
    "cos": _safe(np.cos),
    "tan": _safe(np.tan),
    "tanh": _safe(np.tanh),
    "arctan": _safe(np.arctan),
    "sigmoid": _sigmoid,
    "relu": _safe(lambda x: np.maximum(x, np.float32(0))),
    "gelu": _gelu,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: _f32(x) * _sigmoid(np.float32(1.702) * _f32(x)),
    "gelu_dx": _gelu_dx,
    "silu": lambda x: _f32(x) * _sigmoid(x),
    "silu_dx": _silu_dx,
    "softplus": _softplus,
    "mish": _mish,
    "erf": lambda x: _erf(_f32(x)),
    "erf_dx": lambda x: 2.0 / math.sqrt(math.pi) * np.exp(-_f32(x) ** 2),
    "invert": lambda x: np.invert(_bits(x)),
    "logical_not": lambda x: (_f32(x) == 0).astype(np.float32),
    "exp2": _safe(np.exp2),
    "log2": _safe(np.log2),
}

_ALIASES = {
    "sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "mul": "multiply",
    "sub": "subtract", "div": "divide", "true_divide": "divide", "pow": "power", "amax": "maximum",
    "amin": "minimum", "bypass": "copy", "remainder": "mod",
}


def _register_numpy():
    pairs = {
        np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
        np.true_divide: "divide", np.maximum: "maximum", np.minimum: "minimum", np.power: "power",
        np.mod: "mod", np.fmod: "fmod", np.equal: "equal", np.not_equal: "not_equal",
        np.less: "less", np.less_equal: "less_equal", np.greater: "greater",
        np.greater_equal: "greater_equal", np.logical_and: "logical_and",
        np.logical_or: "logical_or", np.logical_xor: "logical_xor", np.bitwise_and: "bitwise_and",
        np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor", np.left_shift: "left_shift",
        np.right_shift: "right_shift", np.max: "maximum", np.amax: "maximum", np.min: "minimum",
        np.amin: "minimum", np.sum: "add", np.prod: "multiply", np.exp: "exp", np.log: "log",
        np.sqrt: "sqrt", np.square: "square", np.abs: "abs", np.absolute: "abs",
        np.negative: "negative", np.sign: "sign", np.floor: "floor", np.ceil: "ceil",
        np.trunc: "trunc", np.sin: "sin", np.cos: "cos", np.tan: "tan", np.tanh: "tanh",
        np.arctan: "arctan", np.reciprocal: "reciprocal", np.copy: "copy", np.invert: "invert",
        np.logical_not: "logical_not", np.exp2: "exp2", np.log2: "log2",
    }
    for k, v in pairs.items():
        register_token(k, v)


_register_numpy()


def reduce_apply(name: str, x: np.ndarray, axes, keepdims: bool) -> np.ndarray:
    """Reduce values with the ALU op name along axis (fp32)."""
    if name not in REDUCE:
        raise UnsupportedError(f"{name} is not a reduction", rule="alu-reduce", value=name)
    f, _ = REDUCE[name]
    if name == "abs_max":
        return np.max(np.abs(_f32(x)), axis=axes, keepdims=keepdims)
    if name in ("bitwise_or", "bitwise_and", "bitwise_xor"):
        return f.reduce(_bits(x), axis=axes, keepdims=keepdims)
    if name in ("logical_or", "logical_and", "logical_xor"):
        return f.reduce(_f32(x) != 0, axis=axes, keepdims=keepdims).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return f.reduce(_f32(x), axis=axes, keepdims=keepdims)
