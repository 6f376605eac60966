"""Sweeps and side-by-side comparisons of collectives (what ``trnsim collective`` prints)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .collectives import CollectiveResult, collective

try:
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - a core dependency, kept optional here
    _mld = None

_DTYPES = ("fp32", "fp16", "bf16", "fp8", "fp64", "int8", "int32", "uint8")


def dtype_bytes(name: str) -> int:
    """Element size of an nccom-test data type name (fp32, bf16, fp8, ...)."""
    key = str(name).strip().lower()
    np_name = {"fp32": "float32", "fp16": "float16", "fp64": "float64", "int8": "int8", "int32": "int32",
               "uint8": "uint8"}.get(key)
    if np_name:
        return np.dtype(np_name).itemsize
    if key == "bf16" and _mld is not None:
        return np.dtype(_mld.bfloat16).itemsize
    if key == "fp8" and _mld is not None:
        return np.dtype(_mld.float8_e4m3fn).itemsize
    raise ConfigError(f"unknown data type {name!r}", rule="fabric-dtype", limit=list(_DTYPES), value=name)


def sweep(system: str, op: str, sizes: Sequence[float], ranks=None, instances: int = 1,
          algorithm: Optional[str] = None, lnc: Optional[int] = None, hardware_file: Optional[str] = None,
          progress: Optional[Callable[[CollectiveResult], None]] = None,
          in_graph: bool = True) -> List[CollectiveResult]:
    """One collective per size (an nccom-test style sweep); ``progress`` is called after each."""
    out = []
    for s in sizes:
        r = collective(system, op, s, ranks, instances, algorithm, lnc, hardware_file, in_graph)
        out.append(r)
        if progress:
            progress(r)
    return out


def compare(results_a: Sequence[CollectiveResult], results_b: Sequence[CollectiveResult]) -> List[Dict]:
    """Per size: both systems' times and the ratio time_b / time_a (> 1: the first system is faster)."""
    rows = []
    for a, b in zip(results_a, results_b):
        rows.append(dict(size_bytes=a.size_bytes, a=a.system, b=b.system, time_us_a=a.time_us,
                         time_us_b=b.time_us, busbw_gbps_a=a.busbw_gbps, busbw_gbps_b=b.busbw_gbps,
                         ratio_b_over_a=(b.time_us / a.time_us) if a.time_us > 0 else float("nan")))
    return rows
