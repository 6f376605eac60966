"""The evaluation's own sections (compatibility, engineering cost, break-even) as HTML and Markdown, placed
before the comparison tables of the report."""
from __future__ import annotations

import html
from typing import Dict, List, Tuple

from .tables import Table, markdown, money


def compat_tables(ev: Dict) -> List[tuple]:
    """(element id, title, table) of the compatibility step: operators and CUDA sites."""
    c = ev.get("compatibility")
    if not c:
        return []
    ops = [[o["op"], o["class"], str(o["count"]), "yes" if o["documented"] else "no",
            "yes" if o["costable"] else "no", "YES" if o.get("needs_custom_kernel") else "no",
            ", ".join(o.get("locations", [])[:2])] for o in c.get("ops", [])]
    cuda = [[f"{f['file']}:{f['line']}", f["kind"], f["text"]] for f in c.get("cuda_findings", [])]
    out = [("compat-ops-table", "Operators of the captured graph",
            (["op", "class", "calls", "torch-neuronx list", "trnsim cost rule", "needs kernel", "where"], ops))]
    if cuda:
        out.append(("cuda-table", "Hard-coded CUDA in the source", (["where", "kind", "code"], cuda)))
    return out


def break_even_table(ev: Dict) -> Table:
    """Per system: migration dollars, saving per 1M tokens against the baseline, break-even tokens."""
    rows = []
    for sys_, be in ev.get("break_even", {}).items():
        rows.append([sys_, money(be["porting_usd"]), money(be['saving_usd_per_mtok']),
                     f"{be['tokens']:.3g}" if be["pays_back"] else "never"])
    return ["system", "migration cost", "saving per 1M tokens", "break-even (tokens)"], rows


def _html_table(tid: str, title: str, t: Table) -> str:
    cols, rows = t
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<h2>{html.escape(title)}</h2>\n<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_sections(d: Dict) -> Tuple[List[str], List[str]]:
    """HTML fragments before the compare page (step 1, compatibility; the step 2 heading) and after it
    (step 3, engineering cost and break-even)."""
    ev = d["evaluation"]
    c = ev.get("compatibility")
    parts = ['<h2 id="step1">Step 1: compatibility</h2>']
    if c:
        parts.append(f'<p id="compatibility">{html.escape(c["model"])}: {c["total_ops"]} operator calls, '
                     f'{c["documented_pct"]:.1f} % on the torch-neuronx list, {c.get("coverage_costable_pct", 0):.1f} % '
                     f'costable by trnsim (captured with {html.escape(c["capture"])}).</p>')
        parts += [_html_table(*t) for t in compat_tables(ev)]
    else:
        parts.append('<p id="compatibility">No capture (see the notes): compatibility not checked.</p>')
    parts.append('<h2 id="step2">Step 2: benchmark comparison</h2>')
    after = ['<h2 id="step3">Step 3: engineering cost and break-even</h2>',
             f'<p class="summary" id="evaluation-summary">{html.escape(ev["summary"])}</p>',
             _html_table("break-even-table", "Break-even against the baseline", break_even_table(ev))]
    if ev.get("notes"):
        after.append("<ul id=\"evaluation-notes\">" + "".join(f"<li>{html.escape(n)}</li>" for n in ev["notes"]) + "</ul>")
    return parts, after


def markdown_sections(d: Dict) -> Tuple[List[str], List[str]]:
    """The same sections as Markdown (before and after the compare tables)."""
    ev = d["evaluation"]
    out = ["## Step 1: compatibility", ""]
    c = ev.get("compatibility")
    if c:
        out.append(f"{c['total_ops']} operator calls, {c['documented_pct']:.1f} % on the torch-neuronx list.\n")
        out += [markdown(t, tab) for _, t, tab in compat_tables(ev)]
    else:
        out.append("No capture: compatibility not checked.\n")
    out += ["## Step 2: benchmark comparison", ""]
    after = ["## Step 3: engineering cost and break-even", "", ev["summary"], "",
             markdown("Break-even against the baseline", break_even_table(ev))]
    return out, after
