"""The comparison as tables of text: one function per table, shared by the terminal, Markdown, CSV and HTML
outputs. Input is the plain dict ``Comparison.to_dict()`` (or ``Evaluation.to_dict()``) returns."""
from __future__ import annotations

import math

from typing import Dict, List, Sequence, Tuple

Table = Tuple[List[str], List[List[str]]]
DAY = 86400.0


def _cfg(c: Dict) -> str:
    keys = ("tp", "pp", "dp", "cp", "zero", "recompute", "batch", "replicas", "precision")
    parts = [f"{k}={c[k]}" for k in keys if k in c and c[k] not in (None, False)]
    return " ".join(parts)


def money(v: float) -> str:
    """Dollars for people: the sign before the $, thousands separators, whole dollars from $100, cents from
    $1, three significant digits below (never an exponent: $0.000094, not $9.4e-05)."""
    sign, a = ("-" if v < 0 else ""), abs(float(v))
    if a >= 100:
        return f"{sign}${a:,.0f}"
    if a >= 1 or a == 0:
        return f"{sign}${a:,.2f}"
    decimals = 2 - math.floor(math.log10(a))
    return f"{sign}${a:.{decimals}f}"


def duration(s: float) -> str:
    """Seconds in the largest sensible unit."""
    if s >= 2 * DAY:
        return f"{s / DAY:,.1f} d"
    if s >= 7200:
        return f"{s / 3600:,.1f} h"
    return f"{s:,.1f} s"


def systems_table(d: Dict) -> Table:
    """The main comparison table (one row per system, cheapest per token first)."""
    train = d["workload"]["task"] in ("train", "finetune")
    monthly = bool(d["workload"].get("runs_per_month"))
    if train:
        cols = ["system", "config", "instances", "time to train", "time to result", "total cost", "$/1M tok",
                "energy (kWh)", "tokens/MWh", "vs baseline", "band"]
    else:
        cols = ["system", "config", "instances", "TTFT (ms)", "TPOT (ms)", "capacity (req/s)", "total cost",
                "$/1M tok", "energy (kWh)", "tokens/MWh", "vs baseline", "band"]
    ev = "total_with_engineering_usd" in (d["systems"][0] if d["systems"] else {})
    if ev:
        cols.insert(cols.index("$/1M tok"), "with migration (12 mo)")
    if monthly:
        cols.insert(cols.index("total cost") + 1, "$ / month")
    rows = []
    for s in d["systems"]:
        pp = s.get("price_performance")
        flag = " (!) " + "; ".join(d["warnings"][s["system"]]) if s["system"] in (d.get("warnings") or {}) else ""
        head = [s["system"] + (" (baseline)" if s["system"] == d["baseline"] else "") + flag, _cfg(s["config"]),
                str(s["instances"])]
        if train:
            mid = [duration(s["time_s"]), duration(s["time_to_result_s"])]
        else:
            m = s["metrics"]
            mid = [f"{m['ttft_ms']:,.0f}", f"{m['tpot_ms']:,.1f}", f"{m['capacity_requests_per_s']:,.1f}"]
        extra = [money(s["total_with_engineering_usd"])] if ev else []
        month = [money(s["usd_per_month"])] if monthly else []
        rows.append(head + mid + [money(s["cost_usd"])] + month + extra + [money(s['usd_per_mtok']), f"{s['energy_kwh']:,.0f}",
                                  f"{s['tokens_per_mwh']:,.3g}", f"{pp:.2f}x" if pp else "-",
                                  f"+-{100 * s['error_band']['relative']:.0f} %"])
    return cols, rows


def prices_table(d: Dict) -> Table:
    """Where each price came from (kind, region, date, row id) or that it is the user's."""
    rows = []
    for s in d["systems"]:
        p = s["price"]
        src = "your price" if p.get("user") else f"{p['kind']}, {p['region']}, as of {p['as_of']} [{p['id']}]"
        rows.append([s["system"], money(p['usd_per_hour']) + "/h", src])
    return ["system", "price", "source"], rows


def sensitivity_table(d: Dict) -> Table:
    """Each system's $ per 1M tokens at base and its range over the +-band cases, and how often it wins."""
    sens = d.get("sensitivity")
    if not sens:
        return ["system", "base", "low", "high", "cases won"], []
    cases = [sens["base"]] + sens["cases"]
    rows = []
    for s in sens["base"]["ranking"]:
        vals = [c["values"][s] for c in cases]
        # wins counted over the band's cases only, as the summary sentence counts them
        won = sum(1 for c in sens["cases"] if c["winner"] == s)
        rows.append([s, money(sens['base']['values'][s]), money(min(vals)), money(max(vals)),
                     f"{won} of {len(sens['cases'])}"])
    return ["system", "$/1M tok (base)", "lowest in band", "highest in band", "cases won"], rows


def skipped_table(d: Dict) -> Table:
    """Systems that could not run the workload, with the reason."""
    return ["system", "why it was left out"], [[x["system"], x["reason"]] for x in d.get("skipped", [])]


def engineering_table(ev: Dict) -> Table:
    """The engineering-cost items of an evaluation: hours or dollars each, with the figure's source."""
    rows = []
    for it in ev["engineering"]["items"]:
        rows.append([it["item"], f"{it['count']:g}", f"{it['hours']:,.0f} h" if it.get("hours") else "-",
                     money(it["usd"]), it["source"]])
    return ["item", "count", "effort", "cost", "basis"], rows


def csv_rows(d: Dict) -> Tuple[List[str], List[List]]:
    """Raw numbers for a spreadsheet (no formatting)."""
    cols = ["system", "kind", "config", "instances", "accelerators", "time_s", "time_to_result_s", "tokens",
            "usd_per_hour", "cost_usd", "usd_per_mtok", "energy_kwh", "tokens_per_mwh", "price_performance",
            "error_band", "price_kind", "price_id", "price_as_of"]
    rows = []
    for s in d["systems"]:
        p = s["price"]
        rows.append([s["system"], s["kind"], _cfg(s["config"]), s["instances"], s["accelerators"], s["time_s"],
                     s["time_to_result_s"], s["tokens"], s["usd_per_hour"], s["cost_usd"], s["usd_per_mtok"],
                     s["energy_kwh"], s["tokens_per_mwh"], s["price_performance"], s["error_band"]["relative"],
                     p["kind"], p.get("id", ""), p.get("as_of", "")])
    return cols, rows


def markdown(title: str, table: Table) -> str:
    """One Markdown table with a heading."""
    cols, rows = table
    esc = lambda v: str(v).replace("|", "\\|")  # noqa: E731
    out = [f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def all_tables(d: Dict) -> List[Tuple[str, str, Table]]:
    """(element id, title, table) of every table a report shows, in order."""
    out = [("compare-table", "Systems, cheapest per token first", systems_table(d)),
           ("prices-table", "Prices used", prices_table(d)),
           ("sensitivity-table", f"Sensitivity of $ per 1M tokens (+-{100 * _band(d):.0f} %)", sensitivity_table(d))]
    if d.get("skipped"):
        out.append(("skipped-table", "Systems left out", skipped_table(d)))
    if d.get("evaluation"):
        out.append(("engineering-table", "Engineering cost (12 months)", engineering_table(d["evaluation"])))
    return out


def _band(d: Dict) -> float:
    return (d.get("sensitivity") or {}).get("band", 0.25)


def columns_of(tables: Sequence[Table]) -> List[List[str]]:
    """Column headers of several tables (for tests and the CLI)."""
    return [t[0] for t in tables]
