"""The planner's search space: which values of each degree to try, read from ``data/space.toml`` and
overridable per call; ``grids()`` turns it into concrete value lists for one model on one system."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..hardware.figures import lookup, read_package_toml
from .errors import PlanError

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "space.toml")
RECOMPUTE = ("none", "selective", "full")


def _raw() -> dict:
    return read_package_toml(DATA)


def figure(section: str, key: str) -> Any:
    """A value of the space file (``section.key``), without its source."""
    return lookup(_raw(), f"{section}.{key}", "space.toml")


@dataclass(frozen=True)
class SearchSpace:
    """Grids and caps of every dimension the planner enumerates (0 / empty: derived from the system)."""
    tp_max: int = 0
    pp_max: int = 64
    cp: Tuple[int, ...] = (1,)
    ep_max: int = 1
    vp: Tuple[int, ...] = (1,)
    sp: Tuple[bool, ...] = (False,)
    zero: Tuple[int, ...] = (0,)
    micro_batch: Tuple[int, ...] = (1,)
    recompute: Tuple[str, ...] = ("none",)
    lnc: Tuple[int, ...] = ()
    recompute_first_fit: bool = False

    @classmethod
    def default(cls, overrides: Optional[Mapping[str, Any]] = None) -> "SearchSpace":
        """The space of ``data/space.toml`` with ``overrides`` (dimension -> value or list) applied."""
        vals = {f.name: figure("grid", f.name) for f in fields(cls)}
        space = cls(**{k: _coerce(k, v) for k, v in vals.items()})
        return space.with_overrides(overrides or {})

    def with_overrides(self, overrides: Mapping[str, Any]) -> "SearchSpace":
        """A copy with some dimensions replaced (unknown names and bad values are a PlanError)."""
        names = [f.name for f in fields(self)]
        for k in overrides:
            if k not in names:
                raise PlanError(f"unknown search-space dimension {k!r}", rule="plan-space", limit=names, value=k)
        return replace(self, **{k: _coerce(k, v) for k, v in overrides.items()})

    def to_dict(self) -> Dict[str, Any]:
        """Every dimension as plain JSON values."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}


def _coerce(name: str, v: Any) -> Any:
    """Check one dimension's value: caps are non-negative ints, grids non-empty lists of valid values."""
    if name == "recompute_first_fit":
        if isinstance(v, str):
            return v.lower() in ("1", "true", "on", "yes")
        return bool(v[0] if isinstance(v, (list, tuple)) and v else v)
    if name.endswith("_max"):
        if isinstance(v, (list, tuple)) or not isinstance(v, int) or v < 0:
            raise PlanError(f"search-space cap {name} must be a non-negative integer", rule="plan-space",
                            limit=">= 0", value=v)
        return int(v)
    items = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    if name == "lnc" and not items:
        return ()
    if not items:
        raise PlanError(f"search-space dimension {name} is empty", rule="plan-space", limit="at least one value",
                        value=list(items))
    if name == "recompute":
        bad = [x for x in items if x not in RECOMPUTE]
        if bad:
            raise PlanError(f"unknown recompute option {bad[0]!r}", rule="plan-space", limit=RECOMPUTE, value=bad[0])
        return items
    if name == "sp":
        return tuple(bool(x) if not isinstance(x, str) else x.lower() in ("1", "true", "on", "yes") for x in items)
    try:
        out = tuple(int(x) for x in items)
    except (TypeError, ValueError):
        raise PlanError(f"search-space dimension {name} takes integers", rule="plan-space", limit="integers",
                        value=list(items)) from None
    if any(x < (0 if name == "zero" else 1) for x in out) or (name == "zero" and any(x > 1 for x in out)):
        raise PlanError(f"bad value in search-space dimension {name}", rule="plan-space",
                        limit="0 or 1" if name == "zero" else ">= 1", value=list(out))
    return out


def parse_space_args(items: Sequence[str]) -> Dict[str, Any]:
    """``["micro_batch=1,2", "tp_max=8"]`` -> overrides for ``SearchSpace.with_overrides``."""
    out: Dict[str, Any] = {}
    for it in items:
        key, sep, val = it.partition("=")
        if not sep or not key.strip():
            raise PlanError(f"--space takes NAME=VALUE[,VALUE...], got {it!r}", rule="plan-space",
                            limit="NAME=VALUE", value=it)
        parts = [p.strip() for p in val.split(",") if p.strip()]
        key = key.strip().replace("-", "_")
        out[key] = parts[0] if key.endswith("_max") and len(parts) == 1 else parts
        if key.endswith("_max"):
            try:
                out[key] = int(out[key])
            except (TypeError, ValueError):
                raise PlanError(f"{key} takes one integer", rule="plan-space", limit="an integer", value=val) from None
    return out


def divisors(n: int, cap: int) -> Tuple[int, ...]:
    """Divisors of ``n`` up to ``cap``, ascending."""
    return tuple(d for d in range(1, min(n, cap) + 1) if n % d == 0)


@dataclass(frozen=True)
class Grids:
    """Concrete values of every dimension for one model on one system at one LNC."""
    tp: Tuple[int, ...]
    pp: Tuple[int, ...]
    vp: Tuple[int, ...]
    cp: Tuple[int, ...]
    ep: Tuple[int, ...]
    sp: Tuple[bool, ...]
    zero: Tuple[int, ...]
    micro_batch: Tuple[int, ...]
    recompute: Tuple[str, ...]

    @property
    def size(self) -> int:
        """Number of configurations in the grid's cross product."""
        n = 1
        for f in fields(self):
            n *= len(getattr(self, f.name))
        return n


def grids(space: SearchSpace, cores: int, fast_domain: int, experts: int) -> Grids:
    """The grids for a system of ``cores`` ranks (``fast_domain`` of them joined by the fastest fabric: a
    Trainium instance, an NVLink domain) and a model with ``experts`` routed experts (0: dense, EP stays 1)."""
    tp_cap = space.tp_max or fast_domain
    # EP degrees that divide both the cores and the experts: the others could never place the experts
    ep = tuple(d for d in divisors(cores, space.ep_max or cores) if experts % d == 0) if experts else (1,)
    return Grids(tp=divisors(cores, tp_cap), pp=divisors(cores, space.pp_max or cores), vp=space.vp,
                 cp=tuple(c for c in space.cp if c <= cores), ep=ep, sp=space.sp, zero=space.zero,
                 micro_batch=space.micro_batch, recompute=space.recompute)
