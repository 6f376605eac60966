"""How the ranking of systems moves when one system's price, utilization or power is off by +-band.

Utilization here scales achieved throughput (time / factor): the model's MFU is the least certain input.
Price scales the hourly price, power the running watts.  Each case perturbs one system (one factor at a
time, then all 8 corners), and one adversarial case puts the base winner at its worst corner with every
other system at its best.  When any case changes the winner, the report says so plainly.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .formulas import CostError, energy_kwh, run_cost_usd, TOKENS_PER_MTOK

METRICS = ("usd_per_mtok", "kwh_per_mtok", "time_s")
FACTORS = ("price", "utilization", "power")


@dataclass(frozen=True)
class SystemResult:
    """One system's estimate for a workload: time on ``instances`` systems, price, IT power, PUE."""
    system: str
    time_s: float
    tokens: float
    instances: float
    usd_per_hour: float
    it_watts_per_instance: float
    pue: float = 1.0
    utilization: float = 1.0  # informational: the estimate's MFU; the band scales throughput around it

    def metric(self, name: str, price: float = 1.0, utilization: float = 1.0, power: float = 1.0) -> float:
        """The value of ``name`` with the three factors applied (lower is better)."""
        t = self.time_s / utilization
        if name == "time_s":
            return t
        if name == "usd_per_mtok":
            return run_cost_usd(self.instances, t, self.usd_per_hour * price) / self.tokens * TOKENS_PER_MTOK
        if name == "kwh_per_mtok":
            kwh = energy_kwh(self.instances * self.it_watts_per_instance * power, t, self.pue)
            return kwh / self.tokens * TOKENS_PER_MTOK
        raise CostError(f"unknown ranking metric {name!r}", limit=METRICS, value=name)


@dataclass(frozen=True)
class Case:
    """One perturbation: the factors applied to ``system`` (or to several, for the adversarial case)."""
    label: str
    factors: Mapping[str, Mapping[str, float]]  # system -> {price, utilization, power}
    ranking: Tuple[str, ...]
    values: Mapping[str, float]

    @property
    def winner(self) -> str:
        """First-ranked system."""
        return self.ranking[0]

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {"label": self.label, "factors": {k: dict(v) for k, v in self.factors.items()},
                "ranking": list(self.ranking), "winner": self.winner, "values": dict(self.values)}


@dataclass(frozen=True)
class SensitivityReport:
    """The base ranking, every case, and the cases where the winner changed."""
    metric: str
    band: float
    base: Case
    cases: Tuple[Case, ...]
    flips: Tuple[Case, ...] = field(default=())

    @property
    def winner_changes(self) -> bool:
        """True when some case inside the band has another winner."""
        return bool(self.flips)

    def summary(self) -> str:
        """One plain sentence about the winner's robustness."""
        pct = f"+-{self.band * 100:.0f} %"
        if not self.flips:
            return (f"{self.base.winner} stays first on {self.metric} in all {len(self.cases)} cases "
                    f"within {pct} of price, utilization and power.")
        first = self.flips[0]
        return (f"The winner changes inside the {pct} band: {self.base.winner} loses first place on "
                f"{self.metric} to {first.winner} when {first.label} ({len(self.flips)} of "
                f"{len(self.cases)} cases).")

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {"metric": self.metric, "band": self.band, "base": self.base.to_dict(),
                "winner_changes": self.winner_changes, "summary": self.summary(),
                "cases": [c.to_dict() for c in self.cases], "flips": [c.label for c in self.flips]}


def _case(label: str, results: Sequence[SystemResult], metric: str,
          factors: Mapping[str, Mapping[str, float]]) -> Case:
    vals = {r.system: r.metric(metric, **factors.get(r.system, {})) for r in results}
    ranking = tuple(sorted(vals, key=lambda s: (vals[s], s)))
    return Case(label=label, factors=factors, ranking=ranking, values=vals)


def _word(f: str, x: float) -> str:
    return f"{f} {'+' if x > 1 else '-'}{abs(x - 1) * 100:.0f} %"


def sensitivity(results: Sequence[SystemResult], metric: str = "usd_per_mtok", band: float = 0.25,
                factors: Sequence[str] = FACTORS) -> SensitivityReport:
    """Rank ``results`` on ``metric`` at base and under every +-``band`` case; report winner changes."""
    if metric not in METRICS:
        raise CostError(f"unknown ranking metric {metric!r}", limit=METRICS, value=metric)
    if not 0 < band < 1:
        raise CostError("sensitivity band must be in (0, 1)", limit="(0, 1)", value=band)
    bad = set(factors) - set(FACTORS)
    if bad or not factors:
        raise CostError(f"unknown sensitivity factors {sorted(bad)}", limit=FACTORS, value=list(factors))
    names = [r.system for r in results]
    if len(set(names)) != len(names) or not names:
        raise CostError("sensitivity needs distinct systems", value=names)
    base = _case("base", results, metric, {})
    lo, hi = 1.0 - band, 1.0 + band
    cases: List[Case] = []
    for r in results:
        for f in factors:
            for x in (lo, hi):
                cases.append(_case(f"{r.system} {_word(f, x)}", results, metric, {r.system: {f: x}}))
        if len(factors) > 1:
            for combo in itertools.product((lo, hi), repeat=len(factors)):
                fx = dict(zip(factors, combo))
                cases.append(_case(f"{r.system} " + ", ".join(_word(f, x) for f, x in fx.items()),
                                   results, metric, {r.system: fx}))
    if len(results) > 1:
        # the winner at its worst, every rival at its best: the widest gap the band allows
        worst = {"price": hi, "utilization": lo, "power": hi}
        best = {"price": lo, "utilization": hi, "power": lo}
        adv: Dict[str, Dict[str, float]] = {
            s: {f: (worst if s == base.winner else best)[f] for f in factors} for s in names}
        cases.append(_case(f"{base.winner} at its worst and every other system at its best", results,
                           metric, adv))
    flips = tuple(c for c in cases if c.winner != base.winner)
    return SensitivityReport(metric=metric, band=band, base=base, cases=tuple(cases), flips=flips)
