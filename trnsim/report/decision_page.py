"""The report of ``trnsim evaluate --example``: the answer first (which jobs move, what they save, when the
migration pays back), then each job's comparison with its charts, the published claims tested, and the prices
used with their dates and sources.  Built from ``Decision.to_dict()`` and the claims' ``to_dict()``."""
from __future__ import annotations

import html
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

from .charts import backend, plotly_script, render
from .figures import all_charts
from .html import _CSS, _table, _workload
from .tables import Table, all_tables, duration, money


def verdict_table(d: Dict) -> Table:
    """Per job: the baseline's monthly bill, the cheapest Trainium system and its bill, the saving."""
    base = d["baseline"]
    rows = []
    for j in d["jobs"]:
        if j["error"]:
            rows.append([j["title"], "not estimated", "", "", "", j["error"]])
            continue
        per = {s["system"]: s for s in j["comparison"]["systems"]}
        n = j["runs_per_month"]
        b = per.get(base)
        best = j["best_trainium"]
        t = per.get(best) if best else None
        saving = j["monthly_saving_usd"]
        be = "; ".join(f"{u['system']} <= {money(u['break_even_usd_per_hour'])}/h" for u in j["unpriced"])
        rows.append([j["title"], money(b["cost_usd"] * n) if b else "n/a", best or "none fits",
                     money(t["cost_usd"] * n) if t else "n/a",
                     (money(saving) + (f" ({abs(100 * saving / (b['cost_usd'] * n)):.0f} % {'less' if saving >= 0 else 'more'})"
                                       if b else ""))
                     if saving is not None else "n/a", be or "-"])
    return ["job", f"{base} per month", "cheapest Trainium", "its cost per month", "saving per month",
            "unpriced: cheaper than the baseline if priced at"], rows


def migration_table(d: Dict) -> Table:
    """The one-time and 12-month migration items."""
    rows = [[k, money(v)] for k, v in d["migration"].items()]
    rows.append(["total", money(d["migration_usd"])])
    return ["item", "USD"], rows


def claims_table(claims: Sequence[Dict]) -> Table:
    """Each published claim, trnsim's figure and the verdict."""
    rows = []
    for c in claims:
        fig = "n/a" if c["figure"] is None else f"{c['figure']:.2f}x (claim: {c['claimed']:g}x)"
        rows.append([c["text"], c["source"], fig, c["sentence"]])
    return ["claim", "source", "trnsim", "verdict"], rows


def prices_used(d: Dict) -> Table:
    """Every price the report used: amount, kind, region, date, source id."""
    seen: Dict[str, Tuple[str, str]] = {}
    for j in d["jobs"]:
        for s in (j["comparison"] or {}).get("systems", []):
            p = s["price"]
            if p.get("user"):
                src = "your price"
            elif p.get("region") == "derived":
                src = f"example price, {p.get('source', '')}"
            else:
                src = f"{p['kind']}, {p['region']}, as of {p['as_of']} [{p['id']}]"
            seen[s["system"]] = (money(p["usd_per_hour"]) + "/h", src)
    return ["system", "price", "where it came from"], [[k, *v] for k, v in sorted(seen.items())]


def _job_section(j: Dict, which: Optional[str]) -> List[str]:
    out = [f'<h2 id="job-{html.escape(j["key"])}">{html.escape(j["title"])}</h2>',
           f'<p class="note">{html.escape(j["reading"])} ({html.escape(j["source"])})</p>']
    if j["error"]:
        return out + [f'<p class="note">Not estimated: {html.escape(j["error"])}</p>']
    c = j["comparison"]
    out.append(f'<p class="note">{_workload(c)}</p><p class="summary">{html.escape(c["summary"])}</p>')
    tables = all_tables(c)
    tid, title, t = tables[0]
    out.append(_table(f"{j['key']}-{tid}", title, t))
    if which:
        # training: cost against time to result, and the breakdown; serving runs a fixed month, so only the bill
        charts = all_charts(c)[:2] if c["workload"]["task"] != "infer" else all_charts(c)[1:2]
        for ch in charts:
            ch = replace(ch, id=f"{j['key']}-{ch.id}")
            out.append(f'<div class="chart" id="{ch.id}">{render(ch, which)}</div>')
    for u in j["unpriced"]:
        out.append(f'<p class="note">{html.escape(u["system"])} has no published price: {u["instances"]} x for '
                   f'{html.escape(duration(u["time_s"]))}; it costs what {html.escape(c["baseline"])} does at '
                   f'{html.escape(money(u["break_even_usd_per_hour"]))}/h.</p>')
    return out


def decision_page(d: Dict, claims: Sequence[Dict] = (), title: str = "Should these jobs move to Trainium?",
                  which: Optional[str] = None) -> str:
    """The whole self-contained page."""
    which = which or backend()
    parts = [f'<h1 id="report-title">{html.escape(title)}</h1>',
             f'<p class="summary" id="summary">{html.escape(d["summary"])}</p>',
             _table("verdict-table", "The answer, job by job", verdict_table(d)),
             _table("migration-table", "Migration cost (one-time, and 12 months of keeping two paths)",
                    migration_table(d))]
    c = d.get("compatibility")
    if c:
        parts.append(f'<p id="compatibility">Compatibility of {html.escape(c["model"])}: {c["total_ops"]} operator '
                     f'calls captured ({html.escape(c["capture"])}), {c["documented_pct"]:.1f} % on the '
                     f'torch-neuronx list, {len(c.get("cuda_findings", []))} hard-coded CUDA site(s), '
                     f'{len(c.get("needs_custom_kernel", []))} op(s) needing a custom kernel.</p>')
    if which is None:
        parts.append('<p class="note" id="charts-missing">Charts need plotly: pip install plotly.</p>')
    for j in d["jobs"]:
        parts += _job_section(j, which)
    if claims:
        parts.append(_table("claims-table", "Published claims, tested with trnsim's figures", claims_table(claims)))
        parts.append('<ul class="note" id="claims-readings">' + "".join(
            f"<li>{html.escape(x['claim'])}: {html.escape(x['reading'])}</li>" for x in claims) + "</ul>")
    parts.append(_table("prices-used", "Prices used", prices_used(d)))
    if d.get("notes"):
        parts.append('<h2>Notes</h2><ul id="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in d["notes"])
                     + "</ul>")
    head = f"<meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_CSS}</style>"
    if which == "plotly":
        head += plotly_script()
    return f"<!DOCTYPE html>\n<html><head>{head}</head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
