"""A self-contained HTML report (no network: styles and the plotting library's script are inlined)."""
from __future__ import annotations

import html
from typing import Dict, List, Optional

from .charts import backend, plotly_script, render
from .figures import all_charts
from .tables import Table, all_tables

_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}table{border-collapse:collapse;margin:8px 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#eef3f8}td:first-child,th:first-child{text-align:left}
.summary{background:#f5f9ef;border-left:4px solid #6a3;padding:8px 12px}.flip{background:#fdf1e6;border-left-color:#d80}
.note{color:#555;font-size:.85em}.chart{margin:12px 0}"""


def _table(tid: str, title: str, t: Table) -> str:
    cols, rows = t
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<h2>{html.escape(title)}</h2>\n<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _workload(d: Dict) -> str:
    w = d["workload"]
    if w["task"] in ("train", "finetune"):
        kind = (f"LoRA fine-tuning (r={w['lora_rank']}, {w['lora_targets']})" if w["task"] == "finetune"
                else "training")
        what = (f"{kind} {w['model']} on {w['total_tokens']:.3g} tokens (sequence {w['seq']}, "
                f"{w['batch_tokens']:.3g} tokens per step, {w['precision']}), deadline {w['deadline_s'] / 86400:g} days")
    else:
        slo = ", ".join(f"{k} <= {w[f]} ms" for k, f in (("TPOT", "slo_tpot_ms"), ("TTFT", "slo_ttft_ms")) if w[f])
        what = (f"serving {w['model']} at {w['rate']:g} requests/s of {w['input_len']} + {w['output_len']} tokens"
                + (f" ({slo})" if slo else "") + f", {w['total_tokens']:.3g} output tokens")
    return html.escape(what)


def page(d: Dict, title: str = "trnsim compare", sections_before: Optional[List[str]] = None,
         which: Optional[str] = None, sections_after: Optional[List[str]] = None) -> str:
    """The whole report page for ``Comparison.to_dict()`` (an evaluation adds sections before and after)."""
    which = which or backend()
    flip = bool((d.get("sensitivity") or {}).get("winner_changes"))
    parts = [f"<h1 id=\"report-title\">{html.escape(title)}</h1>",
             f'<p class="note" id="workload">{_workload(d)}; prices: {html.escape(d["price_kind"])} unless yours; '
             f'baseline {html.escape(d["baseline"])}. Estimates by trnsim (simulated, not measured): read the band.</p>',
             f'<p class="summary{" flip" if flip else ""}" id="summary">{html.escape(d["summary"])}</p>']
    parts += sections_before or []
    tables = all_tables(d)
    parts.append(_table(*tables[0]))
    charts = all_charts(d)
    if which is None:
        parts.append('<p class="note" id="charts-missing">Charts need plotly or matplotlib: '
                     'pip install "trnsim[report]".</p>')
    else:
        for c in charts:
            frag = render(c, which)
            parts.append(f'<div class="chart" id="{c.id}">{frag}</div>')
    for t in tables[1:]:
        parts.append(_table(*t))
    parts += sections_after or []
    notes = sorted({n for s in d["systems"] for n in s.get("notes", [])})
    if notes:
        parts.append('<h2>Notes</h2><ul id="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    head = f"<meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_CSS}</style>"
    if which == "plotly":
        head += plotly_script()
    return f"<!DOCTYPE html>\n<html><head>{head}</head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
