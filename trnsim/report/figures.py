"""The charts of a comparison report, built from ``Comparison.to_dict()``: cost vs time (Pareto), cost
breakdown, energy, sensitivity range."""
from __future__ import annotations

from typing import Dict, List

from .charts import Chart, pareto_frontier

DAY = 86400.0


def pareto_chart(d: Dict) -> Chart:
    """Total cost against time to result, every system a labelled point, the frontier dashed."""
    pts = [(s["time_to_result_s"] / DAY, s["cost_usd"] + _extra(d, s)) for s in d["systems"]]
    # the axis names exactly what is plotted: in an evaluation the run's cost plus the migration items
    what = "run cost + 12-month migration cost (USD)" if d.get("evaluation") else "run cost (USD)"
    return Chart(id="pareto-chart", title=f"{what.split(' (')[0].capitalize()} vs time to result "
                 "(lower left is better)", kind="scatter",
                 x=tuple(p[0] for p in pts), series=(("systems", tuple(p[1] for p in pts)),),
                 labels=tuple(s["system"] for s in d["systems"]), frontier=tuple(pareto_frontier(pts)),
                 x_title="time to result (days)", y_title=what)


def _extra(d: Dict, s: Dict) -> float:
    """Engineering and migration dollars an evaluation adds to a system's total (0 in a plain compare)."""
    ev = d.get("evaluation") or {}
    return float(ev.get("added_usd", {}).get(s["system"], 0.0))


def cost_chart(d: Dict) -> Chart:
    """Total cost per system split into compute (instance-hours) and, in an evaluation, migration items."""
    names = tuple(s["system"] for s in d["systems"])
    series = [("compute (instance-hours)", tuple(s["cost_usd"] for s in d["systems"]))]
    ev = d.get("evaluation") or {}
    for part, per in (ev.get("added_by_item") or {}).items():
        series.append((part, tuple(float(per.get(n, 0.0)) for n in names)))
    return Chart(id="cost-chart", title="Cost breakdown", kind="stacked", x=names, series=tuple(series),
                 y_title="USD")


def energy_chart(d: Dict) -> Chart:
    """Facility energy (kWh, with PUE) per system."""
    return Chart(id="energy-chart", title="Energy of the workload (facility, with PUE)", kind="bar",
                 x=tuple(s["system"] for s in d["systems"]),
                 series=(("kWh", tuple(s["energy_kwh"] for s in d["systems"])),), y_title="kWh")


def sensitivity_chart(d: Dict) -> Chart:
    """$ per 1M tokens of each system at base and its range over the +-band cases."""
    sens = d["sensitivity"]
    cases = [sens["base"]] + sens["cases"]
    names = tuple(sens["base"]["ranking"])
    lo = tuple(min(c["values"][n] for c in cases) for n in names)
    hi = tuple(max(c["values"][n] for c in cases) for n in names)
    base = tuple(sens["base"]["values"][n] for n in names)
    return Chart(id="sensitivity-chart", title=f"$ per 1M tokens within +-{100 * sens['band']:.0f} % of price, "
                 "utilization and power", kind="range", x=names,
                 series=(("low", lo), ("base", base), ("high", hi)), y_title="USD per 1M tokens")


def all_charts(d: Dict) -> List[Chart]:
    """Every chart the report shows, in order."""
    out = [pareto_chart(d), cost_chart(d), energy_chart(d)]
    if d.get("sensitivity"):
        out.append(sensitivity_chart(d))
    return out
