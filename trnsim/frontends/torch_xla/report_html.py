"""``--report run.html``: a self-contained page (no network) with the summary, a per-step chart of the
estimated Trainium step against the CPU wall time (log scale), the graphs and recompilations, and the op
table of the steady step; the summary shows the whole-instance data-parallel projection beside this run."""
from __future__ import annotations

import html
import math
from typing import Dict, List

from ...outputs import write_text
from .console import fmt_s, projection_column
from .summary import steady_graph

_CSS = ("body{font-family:system-ui,sans-serif;margin:16px;color:#1d232a}h1{font-size:20px}h2{font-size:16px}"
        "table{border-collapse:collapse;font-size:13px;margin-bottom:12px}td,th{padding:2px 10px;text-align:left}"
        "tr:nth-child(even){background:#f3f5f7}.est{stroke:#4a7fd6}.cpu{stroke:#d6804a}")


def _chart(steps: List[Dict], w: int = 720, h: int = 220) -> str:
    """Inline SVG: estimated step and CPU wall per step on a log time axis."""
    vals = [v for s in steps for v in (s["est_s"], s["cpu_s"]) if v > 0]
    if not vals:
        return "<p>no steps</p>"
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    hi = max(hi, lo + 1)
    n = max(len(steps) - 1, 1)

    def xy(i, v):
        x = 50 + (w - 70) * i / n
        y = 10 + (h - 40) * (1 - (math.log10(max(v, 10.0 ** lo)) - lo) / (hi - lo))
        return f"{x:.1f},{y:.1f}"

    out = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" font-size="11">']
    for e in range(lo, hi + 1):
        y = 10 + (h - 40) * (1 - (e - lo) / (hi - lo))
        out.append(f'<line x1="50" x2="{w - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                   f'<text x="2" y="{y + 4:.1f}">{fmt_s(10.0 ** e)}</text>')
    for key, cls in (("est_s", "est"), ("cpu_s", "cpu")):
        pts = " ".join(xy(i, s[key]) for i, s in enumerate(steps))
        out.append(f'<polyline class="{cls}" fill="none" stroke-width="2" points="{pts}"/>')
    out.append(f'<text x="50" y="{h - 8}" fill="#4a7fd6">estimated Trainium step</text>'
               f'<text x="230" y="{h - 8}" fill="#d6804a">CPU wall time</text>'
               f'<text x="{w - 120}" y="{h - 8}">step 1 .. {len(steps)}</text></svg>')
    return "".join(out)


def _table(head: List[str], rows: List[List]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def render_report(session, s: Dict) -> str:
    """The report page as a string."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>trnsim exec: {html.escape(s.get('instance', ''))}"
             f"</title><style>{_CSS}</style></head><body>"]
    parts.append(f"<h1>Estimated Trainium training steps on {html.escape(str(s.get('instance')))}</h1>")
    if not s.get("steps"):
        return "".join(parts) + f"<p>{html.escape(s.get('note', ''))}</p></body></html>"
    tps = s["tokens_per_s"]
    rows = [["ranks (data parallel)", s["world"]], ["steps", s["steps"]],
            ["mean estimated step", fmt_s(s["mean_step_s"])], ["steady step", fmt_s(s["steady_step_s"])],
            ["breakdown", ", ".join(f"{k} {fmt_s(v)}" for k, v in s["breakdown_s"].items() if v > 0)],
            ["tokens/s", f"{tps:,.0f}" if tps else "n/a"], ["MFU", f"{100 * s['mfu']:.1f} %"],
            ["CPU wall per step", fmt_s(s["cpu_mean_s"])],
            ["distinct graphs", f"{s['graphs_distinct']} ({s['compiled']} compiled, {s['cache_hits']} cache hits)"]]
    proj = s.get("instance_projection") or {}
    head, pcol = projection_column(s, proj)
    if pcol:
        # the console's row names -> this table's
        same = {f"steady step (graph {s['steady_graph']})": "steady step", "  breakdown": "breakdown",
                "tokens / s (all ranks)": "tokens/s", "MFU (BF16 dense peak)": "MFU"}
        cells = {same[k]: v for k, v in pcol.items()}
        cells["ranks (data parallel)"] = proj["ranks"]
        rows = [r + [cells.get(r[0], "")] for r in rows]
    parts.append(_table(["figure", *head], rows))
    if proj:
        parts.append(f"<p>The whole-instance projection assumes {html.escape(proj['assumes'])}.</p>")
    parts.append("<h2>Per step</h2>" + _chart(s["per_step"]))
    parts.append("<h2>Graphs</h2>" + _table(["graph", "ops", "first step", "runs", "status", "est. step", "why new"], [
        [g["id"], g["ops"], g["first_step"], g["uses"], g["status"], fmt_s(g["step_s"]), g["reason"]]
        for g in s["graphs"]]))
    agg: Dict[tuple, List] = {}
    est = steady_graph(session).est
    for r in est.rows:
        a = agg.setdefault((r.name, r.phase), [0, 0.0, 0.0, 0.0, r.loc])
        a[0] += 1
        a[1] += r.seconds
        a[2] += r.flops
        a[3] += r.bytes
    total = est.step_s or 1.0
    rows = [[n, ph, a[0], fmt_s(a[1]), f"{100 * a[1] / total:.1f} %", f"{a[2]:.3g}", f"{a[3]:.3g}", a[4]]
            for (n, ph), a in sorted(agg.items(), key=lambda kv: -kv[1][1])]
    parts.append("<h2>Operators of the steady step</h2>" +
                 _table(["op", "phase", "calls", "time", "share", "FLOPs", "HBM bytes", "first line"], rows))
    if s["unlowered_ops"]:
        parts.append("<h2>Ops with no Trainium lowering (not costed)</h2>" + _table(
            ["op", "where", "graphs"], [[k, v["where"], v["graphs"]] for k, v in s["unlowered_ops"].items()]))
    return "".join(parts) + "</body></html>"


def write_report(session, s: Dict, path: str) -> None:
    """Write the HTML report."""
    write_text(path, render_report(session, s))
