"""The explaining sections of the HTML profile, rendered server-side from the ``insight.analyze``
dict: hotspots (by line, by opcode), stalls per engine, critical path, DMA detail (top transfers,
fixed gaps) and speed of light (an SVG roofline with the kernel's point, next to HFU).  Plain
HTML strings: the figures are in the file, readable without scripts."""
from __future__ import annotations

import math
from html import escape
from typing import Dict, Iterable, List, Optional, Sequence

from .events import engine_display


def us(ns: float) -> str:
    """A duration in microseconds, as every table of the page writes it."""
    return f"{ns / 1e3:,.3f} µs"


def pct(share: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{100 * share:.1f} %"


def si(x: float, unit: str) -> str:
    """A rate or count with an SI prefix: 1.23 TFLOP/s, 456.0 GB/s."""
    for p, f in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.2f} {p}{unit}"
    return f"{x:.2f} {unit}"


def table(tid: str, head: Sequence[str], rows: Iterable[Sequence[object]], num: Sequence[int] = ()) -> str:
    """An HTML table (cells escaped); columns listed in ``num`` are right-aligned."""
    h = "".join(f"<th>{escape(str(c))}</th>" for c in head)
    body = []
    for r in rows:
        body.append("<tr>" + "".join(
            f'<td class="num">{escape(str(v))}</td>' if k in num else f"<td>{escape(str(v))}</td>"
            for k, v in enumerate(r)) + "</tr>")
    return f'<table id="{tid}"><tr>{h}</tr>{"".join(body)}</table>'


def _section(sid: str, title: str, body: str, note: str = "") -> str:
    n = f'<p class="small">{escape(note)}</p>' if note else ""
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{n}{body}</section>'


def _engines(d: Dict[str, int]) -> str:
    return ", ".join(f"{engine_display(k)} {v}" for k, v in d.items())


def hotspots(a: dict) -> str:
    """Time, instruction count and engines per kernel source line, and per opcode."""
    h = a.get("hotspots", {})
    by_line = table("hotspots-line", ("source", "code", "time", "share", "instructions", "engines"),
                    ((r["source"], r.get("code", ""), us(r["time_ns"]), pct(r["share"]),
                      f"{r['instructions']:,}", _engines(r.get("engines", {})))
                     for r in h.get("by_line", ())), num=(2, 3, 4))
    by_op = table("hotspots-opcode", ("opcode", "engine", "time", "share", "instructions"),
                  ((r["opcode"], engine_display(r["engine"]), us(r["time_ns"]), pct(r["share"]),
                    f"{r['instructions']:,}") for r in h.get("by_opcode", ())), num=(2, 3, 4))
    return _section("hotspots", "Hotspots",
                    f"<h3>by source line</h3>{by_line}<h3>by opcode</h3>{by_op}",
                    "Time is summed engine occupancy (DMA: per transfer), so shares may exceed the "
                    "latency when engines overlap.")


def stalls(a: dict) -> str:
    """Per engine: busy and idle time, what the idle time waits on, and the longest waits."""
    parts: List[str] = []
    for eng, s in a.get("stalls", {}).items():
        name = engine_display(eng)
        idle = s.get("idle_ns", 0.0) or 0.0
        waits = sorted(s.get("waiting_on", {}).items(), key=lambda kv: -kv[1])
        wait_txt = "; ".join(f"{engine_display(k)} {us(v)}" + (f" ({pct(v / idle)})" if idle else "")
                             for k, v in waits)
        top = table(f"stalls-top-{eng.lower().replace(':', '-')}",
                    ("instruction", "opcode", "source", "waited", "waited on"),
                    ((t["instruction"], t["opcode"], t["source"], us(t["wait_ns"]),
                      _waited(t.get("waited_on"))) for t in s.get("top", ())), num=(0, 3))
        parts.append(f'<div class="stall" data-engine="{escape(name)}"><h3>{escape(name)}</h3>'
                     f'<p>busy {us(s.get("busy_ns", 0.0))}, idle {us(idle)}; '
                     f'waiting on: {escape(wait_txt) or "nothing"}</p>{top}</div>')
    return _section("stalls", "Stalls per engine", "".join(parts),
                    "Idle time of each engine, attributed to the engine or DMA queue whose result "
                    "it waited for; the longest waits with the instruction waited on.")


def _waited(w: Optional[dict]) -> str:
    if not w:
        return ""
    return f"#{w['instruction']} {w['opcode']} on {engine_display(w['engine'])} ({w['source']})"


def critical_path(a: dict) -> str:
    """The critical path's length and the time each engine holds it."""
    path = a.get("critical_path", ())
    per: Dict[str, List[float]] = {}
    for p in path:
        acc = per.setdefault(engine_display(p["engine"]), [0, 0.0])
        acc[0] += 1
        acc[1] += p["end_ns"] - p["start_ns"]
    n = a.get("critical_path_length", len(path))
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    shown = f"; the last {len(path):,} are listed" if n > len(path) else ""
    return _section("critical-path", "Critical path",
                    table("critical-table", ("engine", "instructions", "time"),
                                                   ((k, v[0], us(v[1])) for k, v in rows), num=(1, 2)),
                    f"{n:,} instructions{shown}: the chain of dependencies that sets the latency "
                    f"(tick 'critical path' above the timeline to highlight it).")


def queue_ranges(queues: Iterable[int]) -> str:
    """DMA queues as ranges: [0, 1, 2, 3, 7] -> "q0-q3 q7"."""
    qs = sorted(set(int(q) for q in queues))
    out: List[str] = []
    k = 0
    while k < len(qs):
        j = k
        while j + 1 < len(qs) and qs[j + 1] == qs[j] + 1:
            j += 1
        out.append(f"q{qs[k]}" if j == k else f"q{qs[k]}-q{qs[j]}")
        k = j + 1
    return " ".join(out)


def dma_detail(a: dict) -> str:
    """The longest transfers with their bytes, contiguity, efficiency and queues; the fixed gaps."""
    d = a.get("dma", {})
    s = d.get("summary", {})
    summ = (f"<p>{s.get('transfers', 0):,} transfers, {s.get('bytes', 0):,} bytes, mean efficiency "
            f"{pct(s.get('mean_efficiency', 0.0))}</p>")
    tr = table("dma-transfers", ("instruction", "opcode", "source", "direction", "bytes",
                                 "contiguous B/partition", "efficiency", "queues", "start", "duration"),
               ((t["instruction"], t["opcode"], t["source"], t.get("direction", ""), f"{t['bytes']:,}",
                 f"{t['contiguous_bytes_per_partition']:,}", pct(t["efficiency"]),
                 queue_ranges(t.get("queues", ())), us(t["start_ns"]), us(t["dur_ns"]))
                for t in d.get("transfers", ())), num=(0, 4, 5, 6, 8, 9))
    gaps = table("dma-gaps", ("gap", "start", "duration"),
                 ((g["label"], us(g["start_ns"]), us(g["dur_ns"])) for g in d.get("fixed_gaps", ())),
                 num=(1, 2))
    return _section("dma", "DMA detail", f"{summ}<h3>top transfers</h3>{tr}<h3>fixed-cost gaps</h3>{gaps}",
                    "Efficiency follows the contiguous bytes per partition (short runs waste DMA "
                    "descriptors); the gaps are time when no engine and no queue works.")


def speed_of_light(a: dict, hfu: Optional[float] = None) -> str:
    """Achieved against peak FLOPs and HBM bandwidth, the roofline point, and HFU."""
    s = a.get("speed_of_light")
    if not s:
        return ""
    hfu = s.get("hfu", hfu or 0.0)
    ai = s.get("arithmetic_intensity")
    ai_txt = "no HBM traffic" if ai is None or math.isinf(ai) else f"{ai:,.2f} FLOP/B"
    rows = [("FLOPs", f"{s['flops']:,.0f}"), ("achieved FLOP/s", si(s["flops_share"] * s["peak_flops_per_s"], "FLOP/s")),
            ("peak FLOP/s (dense BF16)", si(s["peak_flops_per_s"], "FLOP/s")), ("FLOPs share of peak", pct(s["flops_share"])),
            ("HBM bytes", f"{s['hbm_bytes']:,}"), ("achieved HBM bandwidth", si(s["hbm_share"] * s["peak_hbm_bytes_per_s"], "B/s")),
            ("peak HBM bandwidth (this core's share)", si(s["peak_hbm_bytes_per_s"], "B/s")),
            ("HBM share of peak", pct(s["hbm_share"])), ("arithmetic intensity", ai_txt),
            ("ridge point", f"{s['ridge_point']:,.2f} FLOP/B"), ("bound", s["bound"]),
            ("HFU (hardware FLOPs utilization)", pct(hfu))]
    body = (f'<div class="row">{roofline_svg(s)}'
            f'{table("sol-table", ("figure", "value"), rows, num=(1,))}</div>')
    return _section("speed-of-light", "Speed of light", body,
                    "The kernel's point on the roofline: FLOP/s achieved against its arithmetic "
                    "intensity (PE FLOPs per HBM byte); the roof is min(peak FLOP/s, intensity x peak "
                    "HBM bandwidth).")


def roofline_svg(s: dict, w: int = 440, h: int = 280) -> str:
    """A log-log roofline (SVG) with the kernel's point; a kernel without FLOPs gets a note."""
    peak, bw, ridge = s["peak_flops_per_s"], s["peak_hbm_bytes_per_s"], s["ridge_point"]
    ai = s.get("arithmetic_intensity") or 0.0
    got = s["flops_share"] * peak
    has_pt = got > 0 and 0 < ai < math.inf
    xs = [ridge] + ([ai] if has_pt else [])
    x0, x1 = math.floor(math.log10(min(xs))) - 1, math.ceil(math.log10(max(xs))) + 1
    ys = [peak, 10 ** x0 * bw] + ([got] if has_pt else [])
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)) + 0.05)
    ml, mr, mt, mb = 56, 12, 12, 40
    pw, ph = w - ml - mr, h - mt - mb

    def X(v):
        return ml + (math.log10(v) - x0) / (x1 - x0) * pw

    def Y(v):
        return mt + (1 - (math.log10(v) - y0) / (y1 - y0)) * ph
    out = [f'<svg id="roofline" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" role="img" aria-label="roofline">',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafbfc" stroke="#c8ccd0"/>']
    for k in range(x0, x1 + 1):
        out.append(f'<text x="{X(10 ** k):.1f}" y="{h - mb + 14}" font-size="10" text-anchor="middle">1e{k}</text>')
    for k in range(y0, y1 + 1):
        out.append(f'<text x="{ml - 4}" y="{Y(10 ** k) + 3:.1f}" font-size="10" text-anchor="end">1e{k}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{h - 6}" font-size="11" text-anchor="middle">'
               f'arithmetic intensity (FLOP per HBM byte)</text>')
    out.append(f'<text x="12" y="{mt + ph / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 12 {mt + ph / 2})">FLOP/s</text>')
    lo = 10 ** x0
    pts = [(lo, lo * bw), (ridge, peak), (10 ** x1, peak)]
    path = " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b in pts)
    out.append(f'<polyline id="roof" points="{path}" fill="none" stroke="#1d232a" stroke-width="2"/>')
    if has_pt:
        out.append(f'<circle id="roofline-point" cx="{X(ai):.1f}" cy="{Y(got):.1f}" r="5" fill="#d65a5a" '
                   f'data-intensity="{ai:.6g}" data-flops-per-s="{got:.6g}"><title>this kernel: '
                   f'{ai:,.2f} FLOP/B, {si(got, "FLOP/s")}</title></circle>')
    else:
        out.append(f'<text id="roofline-note" x="{ml + 8}" y="{mt + ph - 8}" font-size="11" fill="#a33">'
                   f'no PE FLOPs: the kernel has no roofline point (HBM at {pct(s["hbm_share"])} of peak)</text>')
    out.append("</svg>")
    return "".join(out)


def all_sections(a: Optional[dict], hfu: Optional[float] = None) -> str:
    """Every explaining section, in reading order (empty without an analysis)."""
    if not a:
        return ""
    return "".join((hotspots(a), stalls(a), critical_path(a), dma_detail(a), speed_of_light(a, hfu)))
