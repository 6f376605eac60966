"""What the planner ranks by: step time, cost per step or energy per step.

Prices and power come in as plain numbers or callables built by the caller (the CLI builds them from
``trnsim.cost``), because cost sits above the planner in the layer picture.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

from .errors import PlanError

OBJECTIVES = ("time", "cost", "energy")
SECONDS_PER_HOUR = 3600.0

# USD per hour of one instance of ``system``
Price = Union[float, Callable[[str], float]]
# wall watts of one instance of ``system`` (PUE included) at a utilization in [0, 1]
Power = Union[float, Callable[[str, float], float]]


@dataclass(frozen=True)
class Objective:
    """How to score one estimated configuration; lower is better."""
    name: str
    unit: str
    system: str
    price: Optional[Price] = None
    power: Optional[Power] = None

    def score(self, count: int, step_time_s: float, utilization: float) -> float:
        """Seconds, USD or joules of one training step on ``count`` instances."""
        if self.name == "time":
            return step_time_s
        if self.name == "cost":
            return usd_per_step(count, step_time_s, self.usd_per_hour())
        return joules_per_step(count, step_time_s, self.watts(utilization))

    def usd_per_hour(self) -> float:
        """Price of one instance per hour."""
        p = self.price(self.system) if callable(self.price) else self.price
        return _positive("price", p, self.system)

    def watts(self, utilization: float) -> float:
        """Wall power of one instance at ``utilization``."""
        u = min(1.0, max(0.0, utilization))
        w = self.power(self.system, u) if callable(self.power) else self.power
        return _positive("power", w, self.system)


def _positive(what: str, v, system: str) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        v = -1.0
    if not v > 0:
        raise PlanError(f"the {what} of {system} must be a positive number", rule=f"plan-{what}",
                        limit="> 0", value=v)
    return v


def usd_per_step(count: int, step_time_s: float, usd_per_hour: float) -> float:
    """Cost of one step: instances x hourly price x step time."""
    return count * usd_per_hour * step_time_s / SECONDS_PER_HOUR


def joules_per_step(count: int, step_time_s: float, watts: float) -> float:
    """Energy of one step: instances x wall watts x step time."""
    return count * watts * step_time_s


def make_objective(name: str, system: str, price: Optional[Price] = None, power: Optional[Power] = None
                   ) -> Objective:
    """Check the objective and that its price or power was given."""
    if name not in OBJECTIVES:
        raise PlanError(f"unknown objective {name!r}", rule="plan-objective", limit=OBJECTIVES, value=name)
    if name == "cost" and price is None:
        raise PlanError(f"--objective cost needs a price for {system}", rule="plan-price", value=system,
                        hint=f"give --price {system}=USD_PER_HOUR (or price= in Python)")
    if name == "energy" and power is None:
        raise PlanError(f"--objective energy needs the power of {system}", rule="plan-power", value=system,
                        hint="pass power=watts or a callable (system, utilization) -> watts")
    unit = {"time": "s/step", "cost": "USD/step", "energy": "J/step"}[name]
    return Objective(name=name, unit=unit, system=system, price=price, power=power)
