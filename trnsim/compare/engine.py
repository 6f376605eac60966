"""``compare()``: one workload on several systems -> best configuration, time, cost, energy and
price-performance of each, plus how the ranking moves with +-25 % on price, utilization and power."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..cost import PowerModel, PriceBook, PriceError, SensitivityReport, sensitivity, system_economics, with_baseline
from ..cost.economics import SystemEconomics
from ..errors import ConfigError
from .constraints import warning_text, warnings_of
from .search import Choice, choose
from .systems import SystemRef, resolve_system
from .workload import Workload


@dataclass(frozen=True)
class SystemRow:
    """One system's line of the comparison."""
    choice: Choice
    econ: SystemEconomics
    start_delay_s: float = 0.0

    @property
    def system(self) -> str:
        """Catalog key."""
        return self.choice.system.key

    @property
    def time_to_result_s(self) -> float:
        """Waiting for capacity (``--start-delay``) plus the run."""
        return self.start_delay_s + self.choice.time_s

    def to_dict(self) -> dict:
        """The issue's JSON record: system, config, time_s, cost_usd, usd_per_mtok, energy_kwh, error band."""
        e, c, b = self.econ.to_dict(), self.choice, self.choice.error_band
        return {"system": self.system, "label": c.system.label, "kind": c.system.kind,
                "accelerator": c.system.accelerator, "config": dict(c.config), "instances": c.instances,
                "accelerators": c.instances * c.system.accelerators, "time_s": c.time_s,
                "start_delay_s": self.start_delay_s, "time_to_result_s": self.time_to_result_s,
                "tokens": c.tokens, "cost_usd": e["cost_usd"], "usd_per_mtok": e["usd_per_mtok"],
                "usd_per_hour": e["usd_per_hour"], "price": e["price"], "energy_kwh": e["energy_kwh"],
                "tokens_per_mwh": e["tokens_per_mwh"], "joules_per_token": e["joules_per_token"],
                "it_watts_per_instance": e["it_watts_per_instance"], "pue": e["pue"], "busy": c.busy,
                "price_performance": e["price_performance"],
                "error_band": {"relative": b, "time_s": [c.time_s * (1 - b), c.time_s * (1 + b)],
                               "cost_usd": [e["cost_usd"] * (1 - b), e["cost_usd"] * (1 + b)],
                               "usd_per_mtok": [e["usd_per_mtok"] * (1 - b), e["usd_per_mtok"] * (1 + b)],
                               "energy_kwh": [e["energy_kwh"] * (1 - b), e["energy_kwh"] * (1 + b)]},
                "metrics": dict(c.metrics), "notes": list(c.notes)}


@dataclass(frozen=True)
class Comparison:
    """Every system's row (cheapest per token first), the systems that could not run, the sensitivity."""
    workload: Workload
    baseline: str
    rows: Tuple[SystemRow, ...]
    skipped: Tuple[Tuple[str, str], ...]
    sensitivity: Optional[SensitivityReport]
    price_kind: str
    wall_s: float = 0.0
    extra: Mapping = field(default_factory=dict)

    @property
    def winner(self) -> str:
        """The system with the lowest $ per 1M tokens."""
        return self.rows[0].system

    def row(self, system: str) -> SystemRow:
        """The row of one system (by catalog key or alias)."""
        key = resolve_system(system).key
        for r in self.rows:
            if r.system == key:
                return r
        raise ConfigError(f"{system} is not in this comparison", rule="system", value=system,
                          limit=[r.system for r in self.rows])

    def to_dict(self) -> dict:
        """JSON-ready dict (``systems``: the list of per-system records; ``usd_per_month`` = cost per run x
        runs per month when the workload repeats)."""
        systems = [r.to_dict() for r in self.rows]
        if self.workload.runs_per_month:
            for d in systems:
                d["usd_per_month"] = d["cost_usd"] * self.workload.runs_per_month
        return {"workload": self.workload.to_dict(), "baseline": self.baseline, "price_kind": self.price_kind,
                "winner": self.winner, "systems": systems, "warnings": warnings_of(self.workload, systems),
                "skipped": [{"system": s, "reason": why} for s, why in self.skipped],
                "sensitivity": self.sensitivity.to_dict() if self.sensitivity else None,
                "summary": self.summary(), "wall_s": self.wall_s, **dict(self.extra)}

    def summary(self) -> str:
        """Plain sentences: the winner, its margin over the baseline, and whether the band flips it."""
        w, base = self.rows[0], next((r for r in self.rows if r.system == self.baseline), None)
        s = f"{w.system} is cheapest at ${w.econ.cost.usd_per_mtok:,.4g} per 1M tokens"
        if base is not None and base is not w:
            s += f", {w.econ.price_performance:.2f}x the tokens per dollar of {self.baseline}"
        s += "."
        if self.workload.runs_per_month:
            rpm = self.workload.runs_per_month
            s += " Per run / per month ({:g} runs): ".format(rpm) + "; ".join(
                f"{r.system} {r.choice.time_s / 3600:,.2f} h, ${r.econ.cost.cost_usd:,.2f} / ${r.econ.cost.cost_usd * rpm:,.2f}"
                for r in self.rows) + "."
            if base is not None and base is not w:
                save = (base.econ.cost.cost_usd - w.econ.cost.cost_usd) * rpm
                s += f" {w.system} saves ${save:,.2f} a month against {self.baseline}."
        if self.sensitivity is not None:
            s += " " + self.sensitivity.summary()
        warn = warning_text(warnings_of(self.workload, [r.to_dict() for r in self.rows]))
        return f"{s} {warn}" if warn else s


def check_prices(refs: Sequence[SystemRef], prices: PriceBook) -> None:
    """Every system has a price, else one PriceError naming all of those without one and how to give it."""
    missing = []
    for r in refs:
        try:
            prices.price(r.key)
        except PriceError as e:
            missing.append((r.key, e))
    if len(missing) == 1:
        raise missing[0][1]
    if missing:
        names = [k for k, _ in missing]
        raise PriceError(f"no {prices.kind} price for {', '.join(names)}", limit=f"a {prices.kind} price or your own",
                         value=names, hint="give them with " + " ".join(f"--price {k}=USD_PER_HOUR" for k in names)
                         + " (or --prices FILE, or another --price-kind)")


def compare(workload: Workload, systems: Sequence[Union[str, SystemRef]], prices: Optional[PriceBook] = None,
            power: Optional[PowerModel] = None, baseline: Optional[str] = None,
            start_delays: Optional[Mapping[str, float]] = None, band: float = 0.25,
            choose_fn: Callable[[SystemRef, Workload], Choice] = choose,
            progress: Optional[Callable[[str], None]] = None) -> Comparison:
    """Estimate ``workload`` on every system, price and power it, rank by $ per 1M tokens."""
    t0 = time.perf_counter()
    refs = [s if isinstance(s, SystemRef) else resolve_system(s) for s in systems]
    prices = prices or PriceBook.load()
    check_prices(refs, prices)
    base = resolve_system(baseline).key if baseline else refs[0].key
    if base not in [r.key for r in refs]:
        raise ConfigError(f"baseline {baseline!r} is not among the compared systems", rule="baseline",
                          limit=[r.key for r in refs], value=baseline, hint="add it to --systems")
    delays = {resolve_system(k).key: float(v) for k, v in (start_delays or {}).items()}
    rows: List[SystemRow] = []
    skipped: List[Tuple[str, str]] = []
    econs: Dict[str, SystemEconomics] = {}
    for r in refs:
        if progress:
            progress(r.key)
        try:
            c = choose_fn(r, workload)
        except ConfigError as e:
            if r.key == base:
                raise
            skipped.append((r.key, e.message))
            continue
        econs[r.key] = system_economics(r.key, c.time_s, c.tokens, c.instances, prices, power, busy=c.busy)
        rows.append(SystemRow(choice=c, econ=econs[r.key], start_delay_s=delays.get(r.key, 0.0)))
    based = {e.system: e for e in with_baseline(list(econs.values()), base)}
    rows = [SystemRow(choice=x.choice, econ=based[x.system], start_delay_s=x.start_delay_s) for x in rows]
    rows.sort(key=lambda x: (x.econ.cost.usd_per_mtok, x.system))
    sens = sensitivity([x.econ.as_sensitivity_input() for x in rows], "usd_per_mtok", band) if len(rows) > 1 else None
    return Comparison(workload=workload, baseline=base, rows=tuple(rows), skipped=tuple(skipped),
                      sensitivity=sens, price_kind=prices.kind, wall_s=time.perf_counter() - t0)
