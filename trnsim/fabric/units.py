"""Sizes as users write them (bytes, KiB/MiB/GiB, KB/MB/GB, B) and back."""
from __future__ import annotations

import math
import re
from typing import List, Union

from ..checks import BITS_HINT, check_sweep_length, is_bits_unit
from ..errors import ConfigError

# the grammar: trnsim/checks.py (sizes and counts); a lower-case b (bits) is refused before this lookup
_UNITS = {"": 1, "b": 1, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
          "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30, "t": 2 ** 40}  # bare K/M/G/T as nccom-test reads them (binary)
_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: Union[str, int, float]) -> float:
    """'1GiB' -> 1073741824.0; '8B', '512', '64KiB', '1.5MB' all work; bad text raises ConfigError."""
    if isinstance(text, bool):
        raise ConfigError("a size must be a number of bytes", rule="fabric-size", value=text)
    if isinstance(text, (int, float)):
        v = float(text)
    else:
        m = _RE.match(str(text))
        if m and is_bits_unit(m.group(2)):
            raise ConfigError(f"size {text!r} is in bits", rule="fabric-size", limit="bytes: B, KiB, MiB, GiB, "
                              "TiB, KB, MB, GB, TB", value=text, hint=BITS_HINT)
        unit = m.group(2).lower() if m else None
        if not m or unit not in _UNITS:
            raise ConfigError(f"cannot read size {text!r}", rule="fabric-size",
                              limit="a number with an optional unit B, KiB, MiB, GiB, KB, MB, GB",
                              value=text, hint="e.g. 1GiB, 256MiB, 8B, 1048576")
        v = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(v) or v <= 0:
        raise ConfigError("a size must be a positive number of bytes", rule="fabric-size",
                          limit="> 0", value=text)
    return v


def parse_sweep(text: str) -> List[float]:
    """'8B:1GiB' -> 8, 16, 32, ... 1 GiB (factor 2, as nccom-test's -f 2); 'A:B:F' sets the factor."""
    parts = str(text).split(":")
    if len(parts) not in (2, 3):
        raise ConfigError(f"cannot read sweep {text!r}", rule="fabric-size", limit="MIN:MAX[:FACTOR]",
                          value=text, hint="e.g. --sweep 8B:1GiB")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    try:
        factor = float(parts[2]) if len(parts) == 3 else 2.0
    except ValueError:
        factor = float("nan")
    if hi < lo or not factor > 1 or not math.isfinite(factor):
        raise ConfigError("a sweep needs MIN <= MAX and FACTOR > 1", rule="fabric-size",
                          limit="MIN <= MAX, FACTOR > 1", value=text)
    check_sweep_length(int(math.floor(math.log(hi / lo) / math.log(factor) + 1e-9)) + 1, f"--sweep {text}")
    out, v = [], lo
    while v <= hi * (1 + 1e-12):
        out.append(v)
        v *= factor
    return out


def format_size(n: float) -> str:
    """1073741824 -> '1GiB', 1536 -> '1.5KiB', 8 -> '8B'."""
    for unit, m in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= m:
            return f"{n / m:g}{unit}"
    return f"{n:g}B"
