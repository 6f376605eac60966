"""Efficiency factors of the GPU op-cost model (``data/efficiency.toml``), each with its calibration row ids.

Factors are achieved / dense peak for tensor work (per op class and precision) and achieved / peak HBM
bandwidth for memory-bound ops.  Per-GPU overrides live in the file's ``[overrides.<gpu>]``; a caller's
own overrides (``{"matmul": 0.6}``) are applied last.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional

from ...errors import ConfigError, HardwareFileError
from ...hardware.figures import Figure, read_toml, unwrap_figures
from ...hardware.gpus import PRECISIONS

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
EFFICIENCY_FILE = os.path.join(DATA, "efficiency.toml")
ESTIMATOR_FILE = os.path.join(DATA, "estimator.toml")
MEMORY_KINDS = ("norm", "softmax", "elementwise", "embedding", "optimizer")
OVERRIDE_KEYS = ("matmul", "attention", "memory", "kernel_overhead_s")


@dataclass(frozen=True)
class EfficiencyTable:
    """Factors for one GPU: tensor efficiency per class and precision, HBM efficiency, per-kernel overhead."""
    matmul: Mapping[str, float]
    attention: Mapping[str, float]
    attention_precision: str
    memory: float
    kernel_overhead_s: float
    passes: Mapping[str, float]
    provenance: Mapping[str, Figure] = field(default_factory=dict, compare=False, repr=False)

    def with_overrides(self, over: Optional[Mapping[str, float]], precision: str) -> "EfficiencyTable":
        """Apply a caller's ``{"matmul": x, "attention": y, "memory": z, "kernel_overhead_s": s}``
        (tensor factors set the given precision)."""
        if not over:
            return self
        bad = set(over) - set(OVERRIDE_KEYS)
        if bad:
            raise ConfigError(f"unknown efficiency override {sorted(bad)}", rule="efficiency",
                              limit=OVERRIDE_KEYS, value=sorted(bad))
        t = self
        for k, v in over.items():
            _check_factor(k, v, allow_zero=(k == "kernel_overhead_s"))
            if k == "matmul":
                t = replace(t, matmul={**t.matmul, precision: float(v)})
            elif k == "attention":
                # attention runs at attention_precision whatever the matmul precision is
                t = replace(t, attention={**t.attention, t.attention_precision: float(v)})
            else:
                t = replace(t, **{k: float(v)})
        return t


def _check_factor(name: str, v, allow_zero: bool = False) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    if not ok or v < 0 or (not allow_zero and (v == 0 or v > 1)):
        raise ConfigError(f"efficiency {name} must be in (0, 1]" if not allow_zero
                          else f"{name} must be >= 0", rule="efficiency",
                          limit="(0, 1]" if not allow_zero else ">= 0", value=v)


def parse_efficiency(raw: Mapping, file: str, gpu: Optional[str] = None) -> EfficiencyTable:
    """Validate ``efficiency.toml`` and return the table for ``gpu`` (its [overrides.<gpu>] merged)."""
    prov: Dict[str, Figure] = {}
    vals = unwrap_figures(raw, "", file, prov, rule="data-file")
    for sect in ("matmul", "attention", "memory", "overhead", "passes"):
        if not isinstance(vals.get(sect), Mapping):
            raise HardwareFileError(f"{file}: missing [{sect}] table", rule="data-file-missing", value=sect)
    over = vals.get("overrides", {}).get(gpu, {}) if gpu else {}
    tensor = {}
    for cls in ("matmul", "attention"):
        t = {**{p: vals[cls][p] for p in PRECISIONS if p in vals[cls]}, **over.get(cls, {})}
        for p, v in t.items():
            if p not in PRECISIONS:
                raise HardwareFileError(f"{file}: {cls}.{p} is not a precision", rule="data-file-key",
                                        limit=PRECISIONS, value=p)
            _file_factor(f"{cls}.{p}", v, file)
        tensor[cls] = t
    attn_prec = vals["attention"].get("precision", "bf16")
    if attn_prec not in PRECISIONS:
        raise HardwareFileError(f"{file}: attention.precision", rule="data-file-range", limit=PRECISIONS,
                                value=attn_prec)
    memory = over.get("memory", {}).get("hbm", vals["memory"].get("hbm"))
    _file_factor("memory.hbm", memory, file)
    overhead = vals["overhead"].get("kernel_s")
    if not isinstance(overhead, (int, float)) or overhead < 0:
        raise HardwareFileError(f"{file}: overhead.kernel_s must be a number >= 0", rule="data-file-range",
                                limit=">= 0", value=overhead)
    passes = dict(vals["passes"])
    missing = [k for k in MEMORY_KINDS if k not in passes]
    if missing:
        raise HardwareFileError(f"{file}: passes is missing {missing}", rule="data-file-missing",
                                value=missing)
    return EfficiencyTable(matmul=tensor["matmul"], attention=tensor["attention"],
                           attention_precision=attn_prec, memory=float(memory),
                           kernel_overhead_s=float(overhead),
                           passes={k: float(v) for k, v in passes.items()}, provenance=prov)


def _file_factor(path: str, v, file: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise HardwareFileError(f"{file}: {path} must be a factor in (0, 1]", rule="data-file-range",
                                limit="(0, 1]", value=v)


@functools.lru_cache(maxsize=16)
def _raw_cached(path: str, stamp: tuple) -> dict:
    return read_toml(path, "data-file")


def _raw(path: str) -> dict:
    # keyed on the file's mtime and size too, so an edited file is read again
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = ()
    return _raw_cached(path, stamp)


def load_efficiency(gpu: Optional[str] = None, path: Optional[str] = None) -> EfficiencyTable:
    """The efficiency table for ``gpu`` from ``path`` (default: the built-in efficiency.toml)."""
    p = os.path.abspath(path) if path else EFFICIENCY_FILE
    return parse_efficiency(_raw(p), p, gpu)


def estimator_figures(overrides: Optional[Mapping[str, float]] = None) -> dict:
    """``data/estimator.toml`` as ``{"training.error_band": value, ...}``, with ``overrides`` on top."""
    prov: dict = {}
    raw = unwrap_figures(read_toml(ESTIMATOR_FILE, "gpu-estimator-file"), "", ESTIMATOR_FILE, prov,
                         rule="data-file")
    flat = {f"{sect}.{k}": v for sect, t in raw.items() for k, v in t.items()}
    for k, v in (overrides or {}).items():
        if k not in flat:
            raise ConfigError(f"unknown GPU estimator figure {k!r}", rule="gpu-estimator-figure",
                              limit=sorted(flat), value=k)
        flat[k] = float(v)
    return flat
