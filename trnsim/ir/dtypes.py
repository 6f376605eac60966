"""The one dtype table of the trace: byte width and number class per dtype name (no numpy).

Traces name dtypes by string (``Region.dtype``, ``Instruction.dtype_in``); the timing model needs
their storage width and whether they are 16-bit, FP8 or FP32-class floats.  The NKI layer maps its
numpy dtypes to these names (``trnsim.nki.core.dtypes.NAMES``).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Optional

# ---- the table: name -> storage bytes per element ---------------------------------------------
# Packed MX containers hold 4 values per element: float8 x4 in 4 bytes, float4 x4 in 2 bytes
# (hardware.md, MX section); tfloat32 is stored as fp32.
WIDTH: Dict[str, int] = {
    "float64": 8, "int64": 8, "uint64": 8,
    "float32": 4, "tfloat32": 4, "int32": 4, "uint32": 4,
    "bfloat16": 2, "float16": 2, "int16": 2, "uint16": 2,
    "int8": 1, "uint8": 1, "bool": 1,
    "float8_e4m3": 1, "float8_e5m2": 1, "float8_e3m4": 1, "float8_e4m3fn": 1, "float8_e8m0fnu": 1,
    "float8_e5m2_x4": 4, "float8_e4m3fn_x4": 4, "float4_e2m1fn_x4": 2,
}
SIXTEEN_BIT_FLOATS: FrozenSet[str] = frozenset(["bfloat16", "float16"])
FP8: FrozenSet[str] = frozenset(["float8_e4m3", "float8_e5m2", "float8_e3m4", "float8_e4m3fn"])
FP32: FrozenSet[str] = frozenset(["float32", "tfloat32"])
# -----------------------------------------------------------------------------------------------

# Width assumed for a dtype name the table lacks: 4 bytes (an fp32 word), the timing model's
# historical default; ``width(name, default=None)`` refuses instead.
DEFAULT_WIDTH = 4


def width(name: str, default: Optional[int] = DEFAULT_WIDTH) -> int:
    """Storage bytes per element of dtype ``name``; ``default`` for unknown names (None: raise)."""
    got = WIDTH.get(name)
    if got is not None:
        return got
    if default is None:
        from ..errors import ConfigError
        raise ConfigError(f"unknown dtype {name!r}", rule="dtype", limit=" | ".join(WIDTH),
                          value=name)
    return default
