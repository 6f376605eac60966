"""Pure cost formulas: run cost, $ per 1M tokens, energy, tokens per MWh, price-performance,
engineering cost and the break-even point.  No data files, no catalog: numbers in, numbers out."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Tuple

from ..errors import ConfigError

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MTOK = 1e6
WH_PER_KWH = 1e3
KWH_PER_MWH = 1e3
J_PER_KWH = 3.6e6


class CostError(ConfigError):
    """A cost input out of range (negative time, zero tokens, ...)."""
    rule = "cost"


def _nonneg(name: str, v: float, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) \
            or v < 0 or (positive and v == 0):
        raise CostError(f"{name} must be {'positive' if positive else 'non-negative'}",
                        limit="> 0" if positive else ">= 0", value=v)
    return float(v)


def run_cost_usd(instances: float, seconds: float, usd_per_hour: float) -> float:
    """instances x hours x price (per-second billing: no rounding up to whole hours)."""
    return _nonneg("instances", instances) * _nonneg("seconds", seconds) / SECONDS_PER_HOUR \
        * _nonneg("usd_per_hour", usd_per_hour)


def usd_per_mtok(cost_usd: float, tokens: float) -> float:
    """Dollars per million tokens."""
    return _nonneg("cost_usd", cost_usd) / _nonneg("tokens", tokens, positive=True) * TOKENS_PER_MTOK


def energy_kwh(watts: float, seconds: float, pue: float = 1.0) -> float:
    """Facility energy: IT power x time x PUE, in kWh."""
    if _nonneg("pue", pue) < 1.0:
        raise CostError("PUE cannot be below 1", limit=">= 1", value=pue)
    return _nonneg("watts", watts) * _nonneg("seconds", seconds) / SECONDS_PER_HOUR / WH_PER_KWH * pue


def tokens_per_mwh(tokens: float, kwh: float) -> float:
    """Tokens per megawatt-hour of facility energy."""
    return _nonneg("tokens", tokens) / (_nonneg("kwh", kwh, positive=True) / KWH_PER_MWH)


def price_performance(usd_per_mtok_system: float, usd_per_mtok_baseline: float) -> float:
    """How many times more tokens per dollar than the baseline (> 1: better than the baseline)."""
    return _nonneg("baseline usd_per_mtok", usd_per_mtok_baseline) / \
        _nonneg("usd_per_mtok", usd_per_mtok_system, positive=True)


def engineering_cost_usd(hours: float, usd_per_hour: float) -> float:
    """Porting effort in hours x the engineering rate."""
    return _nonneg("hours", hours) * _nonneg("engineering usd_per_hour", usd_per_hour)


def break_even_tokens(porting_usd: float, usd_per_mtok_new: float, usd_per_mtok_old: float) -> Optional[float]:
    """Tokens after which moving to the cheaper-per-token system has paid back ``porting_usd``;
    None when the new system saves nothing per token (it never pays back)."""
    saving = _nonneg("usd_per_mtok_old", usd_per_mtok_old) - _nonneg("usd_per_mtok_new", usd_per_mtok_new)
    if saving <= 0:
        return None
    return _nonneg("porting_usd", porting_usd) / saving * TOKENS_PER_MTOK


@dataclass(frozen=True)
class RunCost:
    """Cost of one run: ``instances`` systems for ``seconds`` at ``usd_per_hour`` producing ``tokens``."""
    instances: float
    seconds: float
    hours: float
    usd_per_hour: float
    cost_usd: float
    tokens: float
    usd_per_mtok: float

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return asdict(self)


def run_cost(instances: float, seconds: float, usd_per_hour: float, tokens: float) -> RunCost:
    """Cost of a run and its $ per 1M tokens."""
    c = run_cost_usd(instances, seconds, usd_per_hour)
    return RunCost(instances=float(instances), seconds=float(seconds), hours=seconds / SECONDS_PER_HOUR,
                   usd_per_hour=float(usd_per_hour), cost_usd=c, tokens=float(tokens),
                   usd_per_mtok=usd_per_mtok(c, tokens))


@dataclass(frozen=True)
class RunEnergy:
    """Energy of one run at ``it_watts`` per system (before PUE) on ``instances`` systems."""
    instances: float
    seconds: float
    it_watts_per_instance: float
    pue: float
    kwh: float
    tokens: float
    tokens_per_mwh: float
    joules_per_token: float

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return asdict(self)


def run_energy(instances: float, seconds: float, it_watts_per_instance: float, pue: float,
               tokens: float) -> RunEnergy:
    """Facility energy of a run, tokens per MWh and joules per token."""
    kwh = energy_kwh(_nonneg("instances", instances) * _nonneg("watts", it_watts_per_instance), seconds, pue)
    _nonneg("tokens", tokens, positive=True)
    return RunEnergy(instances=float(instances), seconds=float(seconds),
                     it_watts_per_instance=float(it_watts_per_instance), pue=float(pue), kwh=kwh,
                     tokens=float(tokens), tokens_per_mwh=tokens_per_mwh(tokens, kwh),
                     joules_per_token=kwh * J_PER_KWH / tokens)


@dataclass(frozen=True)
class EngineeringCost:
    """Porting cost: effort items in hours at one rate, plus fixed-dollar items (egress, compile time)."""
    items: Tuple[Tuple[str, float], ...]
    usd_per_hour: float
    hours: float
    extras: Tuple[Tuple[str, float], ...]
    usd: float

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {"items": dict(self.items), "usd_per_hour": self.usd_per_hour, "hours": self.hours,
                "extras": dict(self.extras), "usd": self.usd}


def engineering_cost(items: Mapping[str, float], usd_per_hour: float,
                     extras: Optional[Mapping[str, float]] = None) -> EngineeringCost:
    """Sum of effort items (hours) x rate plus extra dollar items."""
    hours = sum(_nonneg(f"hours of {k}", v) for k, v in items.items())
    ex = {k: _nonneg(f"usd of {k}", v) for k, v in (extras or {}).items()}
    return EngineeringCost(items=tuple(items.items()), usd_per_hour=float(usd_per_hour), hours=hours,
                           extras=tuple(ex.items()),
                           usd=engineering_cost_usd(hours, usd_per_hour) + sum(ex.values()))


@dataclass(frozen=True)
class BreakEven:
    """Where switching to the system with the lower $ per 1M tokens pays back its porting cost."""
    porting_usd: float
    usd_per_mtok_new: float
    usd_per_mtok_old: float
    saving_usd_per_mtok: float
    tokens: Optional[float]  # None: never pays back

    @property
    def pays_back(self) -> bool:
        """Whether the switch ever pays back."""
        return self.tokens is not None

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {**asdict(self), "pays_back": self.pays_back}


def break_even(porting_usd: float, usd_per_mtok_new: float, usd_per_mtok_old: float) -> BreakEven:
    """Break-even of moving from the old system to the new one, porting cost included."""
    return BreakEven(porting_usd=float(porting_usd), usd_per_mtok_new=float(usd_per_mtok_new),
                     usd_per_mtok_old=float(usd_per_mtok_old),
                     saving_usd_per_mtok=float(usd_per_mtok_old) - float(usd_per_mtok_new),
                     tokens=break_even_tokens(porting_usd, usd_per_mtok_new, usd_per_mtok_old))
