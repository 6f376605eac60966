"""One system's time -> cost, energy and price-performance, joining prices, power and the formulas.

This is what ``trnsim compare`` will call per system once the model estimator gives it a time: the
dict it returns carries the issue's JSON keys (system, time_s, cost_usd, usd_per_mtok, energy_kwh, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from .formulas import RunCost, RunEnergy, price_performance, run_cost, run_energy
from .power import PowerModel, SystemPower, load_power_model, system_power
from .prices import Price, PriceBook
from .sensitivity import SystemResult


@dataclass(frozen=True)
class SystemEconomics:
    """Cost and energy of a workload on ``instances`` of one system, with the price and power used."""
    system: str
    price: Price
    power: SystemPower
    cost: RunCost
    energy: RunEnergy
    price_performance: Optional[float] = None  # vs the baseline: > 1 means more tokens per dollar

    def to_dict(self) -> dict:
        """Flat JSON record (the keys ``trnsim compare --json`` lists under ``systems``)."""
        return {"system": self.system, "time_s": self.cost.seconds, "instances": self.cost.instances,
                "tokens": self.cost.tokens, "usd_per_hour": self.price.usd_per_hour,
                "price": self.price.to_dict(), "cost_usd": self.cost.cost_usd,
                "usd_per_mtok": self.cost.usd_per_mtok, "it_watts_per_instance": self.power.it_watts,
                "pue": self.power.pue, "energy_kwh": self.energy.kwh,
                "tokens_per_mwh": self.energy.tokens_per_mwh, "joules_per_token": self.energy.joules_per_token,
                "price_performance": self.price_performance}

    def as_sensitivity_input(self, utilization: float = 1.0) -> SystemResult:
        """The inputs ``sensitivity()`` varies (``utilization``: the estimate's MFU, informational)."""
        return SystemResult(system=self.system, time_s=self.cost.seconds, tokens=self.cost.tokens,
                            instances=self.cost.instances, usd_per_hour=self.price.usd_per_hour,
                            it_watts_per_instance=self.power.it_watts, pue=self.power.pue,
                            utilization=utilization)


def system_economics(system: str, time_s: float, tokens: float, instances: float, prices: PriceBook,
                     power: Optional[PowerModel] = None, busy: float = 1.0) -> SystemEconomics:
    """Cost and energy of ``tokens`` produced in ``time_s`` on ``instances`` x ``system``; ``busy`` is
    the fraction of time the accelerators draw busy power."""
    price = prices.price(system)
    pw = system_power(system, busy, power or load_power_model())
    return SystemEconomics(system=pw.system, price=price, power=pw,
                           cost=run_cost(instances, time_s, price.usd_per_hour, tokens),
                           energy=run_energy(instances, time_s, pw.it_watts, pw.pue, tokens))


def with_baseline(results: Sequence[SystemEconomics], baseline: str) -> List[SystemEconomics]:
    """The same results with price-performance relative to ``baseline`` (a system among them)."""
    from dataclasses import replace
    from .prices import PriceError, canonical_system
    base = {r.system: r for r in results}.get(canonical_system(baseline))
    if base is None:
        raise PriceError(f"baseline {baseline!r} is not among the compared systems", rule="baseline",
                         limit=[r.system for r in results], value=baseline)
    return [replace(r, price_performance=price_performance(r.cost.usd_per_mtok, base.cost.usd_per_mtok))
            for r in results]


def ranking(results: Sequence[SystemEconomics], key: str = "usd_per_mtok") -> Dict[str, int]:
    """Rank (1 = best, lowest) of each system on a ``to_dict()`` key."""
    order = sorted(results, key=lambda r: (r.to_dict()[key], r.system))
    return {r.system: i + 1 for i, r in enumerate(order)}
