"""Whether each compared system's result meets the workload's own constraints: the training deadline,
the serving SLOs (TTFT at the batch actually chosen, TPOT) and the request rate.  A miss becomes a
warning in the table, the summary and the reports, not only a note in ``--json``."""
from __future__ import annotations

from typing import Dict, List, Mapping

from .workload import DAY_S, Workload


def misses(w: Workload, row: Mapping) -> List[str]:
    """The constraints one system's record (``SystemRow.to_dict()``) misses, as short phrases."""
    out: List[str] = []
    m = row.get("metrics") or {}
    if w.task == "train":
        t = float(row.get("time_s") or 0.0)
        if t > w.deadline_s:
            out.append(f"takes {t / DAY_S:,.1f} days, over the {w.deadline_s / DAY_S:g}-day deadline")
        return out
    ttft = m.get("ttft_ms_full_batch", m.get("ttft_ms"))
    if w.slo_ttft_ms and ttft is not None and ttft > w.slo_ttft_ms:
        out.append(f"TTFT {ttft:,.0f} ms at batch {m.get('batch', '?')}, over the {w.slo_ttft_ms:g} ms SLO")
    tpot = m.get("tpot_ms")
    if w.slo_tpot_ms and tpot is not None and tpot > w.slo_tpot_ms:
        out.append(f"TPOT {tpot:,.1f} ms, over the {w.slo_tpot_ms:g} ms SLO")
    cap = m.get("capacity_requests_per_s")
    if cap is not None and cap < w.rate * (1 - 1e-9):
        out.append(f"serves {cap:,.2f} requests/s, under the {w.rate:g}/s asked for")
    return out


def warnings_of(w: Workload, rows: List[Mapping]) -> Dict[str, List[str]]:
    """``{system: [missed constraints]}`` for the systems that miss any."""
    out = {}
    for r in rows:
        miss = misses(w, r)
        if miss:
            out[r["system"]] = miss
    return out


def warning_text(warnings: Mapping[str, List[str]]) -> str:
    """The sentence the summary ends with ("" when every system meets its constraints)."""
    if not warnings:
        return ""
    return " ".join(f"WARNING: {s} misses its constraint: {'; '.join(m)}." for s, m in warnings.items())
