"""Training frameworks as data (``data/train_frameworks.toml``): how each lays out weights, gradients and optimizer
state (ZeRO stage and its sharding group), the memory it reserves, its recipe defaults (sequence parallel,
recompute) and its fixed per-step cost per generation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ..errors import ConfigError
from .datafiles import load

TRAINIUM_DEFAULT = "nxd"
GPU_DEFAULT = "megatron"
ZERO_STAGES = (0, 1, 2, 3)


class FrameworkError(ConfigError):
    """A training framework name or setting the estimator does not know."""
    rule = "framework"


@dataclass(frozen=True)
class Framework:
    """One framework's memory layout and recipe defaults (figures from train_frameworks.toml)."""
    name: str
    label: str
    zero: int
    shard_over_cp: bool
    grad_bytes: float
    main_grad_bytes: float
    reserve_bytes: float
    sp: bool
    recompute: str
    fixed_step_s: Dict[str, float] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)

    def step_cost_s(self, target: str) -> float:
        """Fixed seconds per step on generation ``target`` (``trn2``, ``h100-sxm`` -> ``h100``); 0 if none."""
        t = (target or "").lower()
        if t in self.fixed_step_s:
            return self.fixed_step_s[t]
        for k, v in self.fixed_step_s.items():
            if t.startswith(k):
                return v
        return 0.0


def _val(node: Any) -> Any:
    return node["value"] if isinstance(node, Mapping) and "value" in node else node


def names() -> tuple:
    """The frameworks train_frameworks.toml describes."""
    return tuple(load("train_frameworks"))


def get_framework(name: Optional[str], gpu: bool = False, overrides: Optional[Mapping] = None) -> Framework:
    """A framework by name (None: NeuronX Distributed on Trainium, Megatron on GPUs); ``overrides`` keys
    ``"<framework>.<figure>"`` replace single figures."""
    key = (name or (GPU_DEFAULT if gpu else TRAINIUM_DEFAULT)).lower()
    data = load("train_frameworks")
    if key not in data:
        raise FrameworkError(f"unknown training framework {name!r}", limit=sorted(data), value=name)
    raw = dict(data[key])
    over = {k.split(".", 1)[1]: v for k, v in (overrides or {}).items() if k.startswith(key + ".")}
    get = lambda k: over.get(k, _val(raw.get(k)))  # noqa: E731
    steps = {g: float(_val(v)) for g, v in (raw.get("fixed_step_s") or {}).items()}
    steps.update({k.split(".", 1)[1]: float(v) for k, v in over.items() if k.startswith("fixed_step_s.")})
    srcs = {k: v.get("source", "") for k, v in raw.items() if isinstance(v, Mapping) and "source" in v}
    return Framework(name=key, label=str(raw.get("label", key)), zero=int(get("zero")),
                     shard_over_cp=bool(get("shard_over_cp")), grad_bytes=float(get("grad_bytes")),
                     main_grad_bytes=float(get("main_grad_bytes")), reserve_bytes=float(get("reserve_bytes")),
                     sp=bool(get("sp")), recompute=str(get("recompute")), fixed_step_s=steps, sources=srcs)


def check_zero(zero: int) -> int:
    """A ZeRO stage 0-3, or a FrameworkError naming the limit."""
    if isinstance(zero, bool) or zero not in ZERO_STAGES:
        raise FrameworkError(f"ZeRO stage must be 0, 1, 2 or 3, got {zero!r}", limit=ZERO_STAGES, value=zero)
    return int(zero)


def defaults_note(fw: Framework, zero: int, sp: bool, recompute: str, chosen: Mapping[str, bool]) -> str:
    """One line naming the framework settings in force and which came from its defaults (switchable)."""
    parts = []
    for what, val, flag in (("ZeRO", f"ZeRO-{zero}" if zero else "no ZeRO", "--zero"),
                            ("sp", "sequence parallel" if sp else "no sequence parallel", "--sp / --no-sp"),
                            ("recompute", f"{recompute} recompute", "--recompute")):
        parts.append(val + ("" if chosen.get(what) else f" (default; {flag})"))
    return f"{fw.label}: " + ", ".join(parts)
