"""Serving frameworks as data (``data/frameworks.toml``): per-step and per-request costs, the memory each one
leaves the KV cache, prefill chunking and KV-cache formats.  A framework is a serving setting the user names
(``--framework trtllm|vllm|sglang|nxdi``), not a constant hidden in the estimator."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Tuple

from ..errors import ConfigError
from .datafiles import load

MEMORY_RULES = ("free", "total")
KV_FORMATS = ("bf16", "fp8", "fp4")
# the weight precisions narrower than 16 bits (the "weights" KV default picks an 8-bit cache for them)
NARROW_WEIGHTS = ("fp8", "mxfp8", "fp4", "mxfp4")


@dataclass(frozen=True)
class Framework:
    """One serving framework's figures (seconds, bytes, tokens)."""
    key: str
    name: str
    systems: str
    step_overhead_s: float
    request_overhead_s: float
    memory_rule: str
    kv_fraction: float
    reserve_bytes: float
    prefill_chunk_tokens: int
    max_batch: int
    kv_default: str
    kv_formats: Tuple[str, ...]

    def to_dict(self) -> dict:
        """JSON-ready figures."""
        d = asdict(self)
        d["kv_formats"] = list(self.kv_formats)
        return d


def framework_names() -> Tuple[str, ...]:
    """The frameworks the data file describes."""
    return tuple(k for k in load("frameworks") if k != "kv_bytes")


def load_framework(key: str, overrides: Optional[Mapping[str, object]] = None) -> Framework:
    """The framework ``key`` with ``overrides`` (``{"vllm.kv_fraction": 0.95}`` or ``{"kv_fraction": 0.95}``)."""
    raw = load("frameworks")
    names = framework_names()
    if key not in names:
        raise ConfigError(f"unknown serving framework {key!r}", rule="framework", limit=names, value=key)
    over = dict(overrides or {})
    vals = {}
    for field, v in raw[key].items():
        v = v["value"] if isinstance(v, Mapping) else v
        vals[field] = over.get(f"{key}.{field}", over.get(field, v))
    fw = Framework(key=key, name=str(vals["name"]), systems=str(vals["systems"]),
                   step_overhead_s=float(vals["step_overhead_s"]),
                   request_overhead_s=float(vals["request_overhead_s"]), memory_rule=str(vals["memory_rule"]),
                   kv_fraction=float(vals["kv_fraction"]), reserve_bytes=float(vals["reserve_bytes"]),
                   prefill_chunk_tokens=int(vals["prefill_chunk_tokens"]), max_batch=int(vals["max_batch"]),
                   kv_default=str(vals["kv_default"]), kv_formats=tuple(vals["kv_formats"]))
    _check(fw)
    return fw


def _check(fw: Framework) -> None:
    if fw.memory_rule not in MEMORY_RULES:
        raise ConfigError(f"{fw.key}.memory_rule", rule="framework-figure", limit=MEMORY_RULES,
                          value=fw.memory_rule)
    if not 0 < fw.kv_fraction <= 1:
        raise ConfigError(f"{fw.key}.kv_fraction must be in (0, 1]", rule="framework-figure", limit="(0, 1]",
                          value=fw.kv_fraction)
    for name in ("step_overhead_s", "request_overhead_s", "reserve_bytes", "prefill_chunk_tokens"):
        if getattr(fw, name) < 0:
            raise ConfigError(f"{fw.key}.{name} must be >= 0", rule="framework-figure", limit=">= 0",
                              value=getattr(fw, name))
    if fw.max_batch < 1:
        raise ConfigError(f"{fw.key}.max_batch must be >= 1", rule="framework-figure", limit=">= 1",
                          value=fw.max_batch)


def kv_bytes(fmt: str) -> float:
    """Bytes per stored KV element of a cache format (scales included)."""
    table = load("frameworks")["kv_bytes"]
    if fmt not in table:
        raise ConfigError(f"unknown KV-cache format {fmt!r}", rule="kv-dtype", limit=tuple(table), value=fmt)
    return float(table[fmt]["value"])


def resolve_kv(fw: Framework, kv: Optional[str], weight_precision: str, hardware_formats: Tuple[str, ...]) -> str:
    """The KV-cache format a deployment uses: the one asked for, else the framework's default; refused where
    the framework or the hardware lacks it."""
    if kv is None:
        if fw.kv_default == "weights":
            kv = "fp8" if weight_precision in NARROW_WEIGHTS and "fp8" in hardware_formats else "bf16"
        else:
            kv = fw.kv_default
    kv = {"fp16": "bf16", "auto": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "fp4"}.get(kv, kv)
    if kv not in KV_FORMATS:
        raise ConfigError(f"unknown KV-cache format {kv!r}", rule="kv-dtype", limit=KV_FORMATS, value=kv)
    if kv not in fw.kv_formats:
        raise ConfigError(f"{fw.name} has no {kv} KV cache", rule="kv-dtype", limit=fw.kv_formats, value=kv)
    if kv not in hardware_formats:
        raise ConfigError(f"the hardware has no {kv} format for a KV cache", rule="kv-dtype",
                          limit=hardware_formats, value=kv)
    return kv
