"""A self-contained HTML profile (no network): the summary and verdict, a zoomable timeline with
the SBUF / PSUM occupancy under it on the same time axis, then the explaining sections
(``html_sections``: hotspots, stalls, critical path, DMA detail, speed of light).

The timeline's data travels as typed columns (per track, slices sorted by start: delta-coded start
ticks, duration ticks, instruction) in one zlib-compressed, base64 blob that the page inflates
with the browser's own DecompressionStream; the script (``assets/timeline.js``) binary-searches the
visible range of each track and merges slices closer than a pixel, so a 400k-instruction kernel
stays readable zoomed out and shows single instructions zoomed in."""
from __future__ import annotations

import base64
import html
import json
import re
import zlib
from importlib import resources
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..outputs import write_text
from ..ir.engines import ENGINE_CODE
from ..timing.estimate import Estimate
from ..timing.figures import RunFigures
from .summary import KernelSummary, summarize
from .events import (TRACK_ORDER, _detail, analyses, dma_columns, engine_display,
                     instruction_columns)
from .html_sections import all_sections, pct

# tooltips carry each instruction's operand detail up to this many instructions per core (the
# text costs ~60 bytes an instruction; beyond, the Perfetto trace has it)
DETAIL_LIMIT = 50_000
# blobs smaller than this stay uncompressed (older browsers without DecompressionStream open them)
COMPRESS_ABOVE = 64 * 1024
_DMA = ENGINE_CODE["dma"]
COLORS = {"tensor": "#4a7fd6", "vector": "#e08a2e", "scalar": "#3aa657", "gpsimd": "#9d5bd2",
          "sync": "#888888", "dma": "#d65a5a"}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def tick_ns(latency_ns: float) -> float:
    """The time quantum of the page's columns: the smallest power of ten from 0.01 ns up that
    keeps the latency inside 32-bit ticks."""
    t = 0.01
    while latency_ns / t >= 2 ** 32 - 1:
        t *= 10
    return t


class _Blob:
    """Typed little-endian columns appended to one buffer, 8-byte aligned, with a manifest."""

    def __init__(self):
        self.parts: List[bytes] = []
        self.size = 0
        self.cols: Dict[str, Tuple[str, int, int]] = {}

    def add(self, name: str, arr, kind: str) -> str:
        dt = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "f32": "<f4", "f64": "<f8"}[kind]
        a = np.ascontiguousarray(np.asarray(arr).astype(dt))
        self.cols[name] = (kind, self.size, int(a.size))
        b = a.tobytes()
        pad = (-len(b)) % 8
        self.parts.append(b + b"\0" * pad)
        self.size += len(b) + pad
        return name


def _index(values: List[str], table: Dict[str, int]) -> np.ndarray:
    """Each value's row in ``table`` (new values appended)."""
    return np.fromiter((table.setdefault(v, len(table)) for v in values), np.int64, len(values))


def _track(blob: _Blob, key: str, s: np.ndarray, e: np.ndarray, ins: np.ndarray, tick: float):
    order = np.argsort(s, kind="stable")
    st = np.rint(s[order] / tick).astype(np.int64)
    en = np.maximum(np.rint(e[order] / tick).astype(np.int64), st)
    delta = np.diff(st, prepend=0)
    return order, {"d": blob.add(key + "d", delta, "u32"), "du": blob.add(key + "du", en - st, "u32"),
                   "ins": blob.add(key + "i", ins[order], "u32"), "n": int(len(s))}


def _core_data(est: Estimate, c, blob: _Blob, tick: float, a: dict, names: Dict[str, int],
               srcs: Dict[str, int]) -> Dict[str, Any]:
    tl, instrs = c.timeline, c.trace.instructions
    p = f"c{c.core}_"
    n = len(instrs)
    op, sc, op_names, src_names = instruction_columns(c.trace)
    # the page keeps one opcode and one source table for every core
    name_col = np.asarray([names.setdefault(x, len(names)) for x in op_names], np.int64)[op] if n else op
    src_col = np.asarray([srcs.setdefault(x, len(srcs)) for x in src_names], np.int64)[sc] if n else sc
    tracks = []
    for e in TRACK_ORDER:
        idx = np.flatnonzero(tl.engine_code == ENGINE_CODE[e])
        _, t = _track(blob, f"{p}{e}_", tl.start[idx], tl.busy_end[idx], idx, tick)
        tracks.append(dict(t, label=engine_display(e), kind="engine", color=COLORS[e]))
    dp = tl.dma_parts
    counts = np.diff(dp.off) if len(dp.off) else np.zeros(0, np.int64)
    order, t = _track(blob, f"{p}dma_", dp.start, dp.end, dp.ins, tick)
    qs = np.asarray(dp.queue)
    flat = (np.concatenate([qs[dp.off[g]:dp.off[g + 1]] for g in order]) if len(order)
            else np.zeros(0, np.uint8))
    t.update(label=f"DMA ({c.spec.dma_engines} queues)", kind="dma", color=COLORS["dma"],
             qn=blob.add(p + "qn", counts[order], "u8"), qs=blob.add(p + "qs", flat, "u8"))
    tracks.append(t)
    cols = dma_columns(est, c.core, a if a.get("core") == c.core else None)
    out = {"core": c.core, "n": n, "queues": c.spec.dma_engines, "tracks": tracks,
           "name": blob.add(p + "name", name_col, "u16" if len(names) < 65536 else "u32"),
           "src": blob.add(p + "src", src_col, "u32"),
           "dma": {"ins": blob.add(p + "dma_ins", cols["ins"], "u32"),
                   "bytes": blob.add(p + "dma_bytes", cols["bytes"], "f64"),
                   "contig": blob.add(p + "dma_contig", cols["contiguous"], "f64"),
                   "eff": blob.add(p + "dma_eff", cols["efficiency"], "f32")},
           "critical": None, "details": None, "detail_index": None, "gaps": []}
    if a.get("core") == c.core:
        gaps = sorted(a.get("dma", {}).get("fixed_gaps", ()), key=lambda g: g["start_ns"])
        out["gaps"] = [[g["label"], g["start_ns"], g["dur_ns"]] for g in gaps]
    if a.get("core") == c.core and a.get("critical_path"):
        out["critical"] = blob.add(p + "crit", [int(x["instruction"]) for x in a["critical_path"]], "u32")
    if n <= DETAIL_LIMIT:
        dt: Dict[str, int] = {}
        out["detail_index"] = blob.add(p + "detail", _index([_detail(i) for i in instrs], dt), "u32")
        out["details"] = list(dt)
    return out


def report_data(est: Estimate, analysis: Any = None) -> Tuple[Dict[str, Any], bytes]:
    """The page's manifest (JSON) and its column blob (zlib-compressed when large)."""
    found = analyses(est, analysis)
    tick = tick_ns(est.latency_ns)
    blob = _Blob()
    names: Dict[str, int] = {}
    srcs: Dict[str, int] = {}
    cores = [_core_data(est, c, blob, tick, found.get(c.core, {}), names, srcs) for c in est.cores]
    raw = b"".join(blob.parts)
    z = len(raw) > COMPRESS_ABOVE
    occ = {}
    for core, a in found.items():
        for m, o in (a.get("occupancy") or {}).items():
            occ.setdefault(str(core), {})[m] = o
    meta = {"latency_ns": est.latency_ns, "tick_ns": tick, "z": z, "cols": blob.cols, "cores": cores,
            "names": list(names), "sources": list(srcs), "occupancy": occ,
            "detail_limit": DETAIL_LIMIT, "raw_bytes": len(raw)}
    return meta, (zlib.compress(raw, 6) if z else raw)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>trnsim profile: __TITLE__</title><style>__CSS__</style></head><body>
<h1 id="report-title">__TITLE__</h1>
<div class="verdict" id="verdict">__VERDICT__</div>
<div class="row">__SUMMARY__</div>
<section id="timeline"><h2>Timeline</h2>
<div class="controls"><label><input type="checkbox" id="crit-toggle"> critical path</label>
<button id="reset">reset zoom</button>
<span class="small">scroll to zoom, drag to pan, click the DMA row to expand its queues, hover a slice
for what the Perfetto slice carries</span></div>
<div id="wrap"><canvas id="tl"></canvas><canvas id="mem"></canvas><div id="tip"></div></div>
<p class="small" id="mem-note">__MEMNOTE__</p>
<p class="small" id="status">loading the timeline...</p></section>
__SECTIONS__
<pre id="axis-dump" hidden></pre><pre id="view-dump" hidden></pre><pre id="tip-dump" hidden></pre>
<script id="meta" type="application/json">__META__</script>
<script id="blob" type="application/octet-stream">__BLOB__</script>
<script>__JS__</script></body></html>
"""


def _summary(f: RunFigures) -> str:
    from .html_sections import table
    rows = [("target", f.target), ("latency", f"{f.latency_us:,.3f} µs"),
            ("instructions", f"{f.instructions:,}"), ("HFU", pct(f.hfu)),
            ("HBM bytes", f"{f.hbm_bytes:,}"), ("HBM bandwidth", f"{f.hbm_gbps:.1f} GB/s"),
            ("PE throttled", f"{f.pe_throttled_us} µs"), ("trnsim wall time", f"{f.sim_seconds} s")]
    busy = []
    for k, v in f.engines.items():
        if k.startswith("DMA:q"):
            continue
        busy.append(f"<tr><td>{html.escape(engine_display(k))}</td><td class=num>{pct(v)}</td>"
                    f'<td><span class="bar" style="width:{round(200 * min(v, 1.0))}px"></span></td></tr>')
    return (table("summary", ("summary", ""), rows) +
            f'<table id="engines"><tr><th>engine</th><th>busy</th><th></th></tr>{"".join(busy)}</table>')


def _memnote(found: Dict[int, dict]) -> str:
    out = []
    for core, a in sorted(found.items()):
        for m, o in (a.get("occupancy") or {}).items():
            cap = o.get("capacity_bytes_per_partition") or 0
            share = f" ({pct(o['peak'] / cap)} of {cap / 1024:,.0f} KiB)" if cap else ""
            out.append(f"NC{core} {m.upper()} peak {o['peak'] / 1024:,.1f} KiB per partition{share}")
    return html.escape("; ".join(out) + ("." if out else "No occupancy series (no analysis)."))


def render_html(est: Estimate, title: str = "", analysis: Any = None,
                summary: Optional[KernelSummary] = None) -> str:
    """A self-contained HTML report (no network access needed to view it); ``analysis``: the
    ``insight.analyze`` dict (None computes it, False leaves the explaining sections out);
    ``summary``: ``summarize(est)`` when the caller has it already (it walks every timeline)."""
    found = analyses(est, analysis)
    meta, blob = report_data(est, list(found.values()) or False)
    s = summary if summary is not None else summarize(est)
    # the analysis explains one core (the slowest): its sections lead the page
    main = next(iter(found.values())) if found else None
    t = html.escape(title or f"{est.kernel} on {est.target}")
    parts = {"__TITLE__": t, "__CSS__": _asset("report.css"),
             "__VERDICT__": html.escape((main or {}).get("verdict") or s.bottleneck),
             "__SUMMARY__": _summary(s.figures), "__MEMNOTE__": _memnote(found),
             "__SECTIONS__": all_sections(main, s.figures.hfu),
             "__META__": json.dumps(meta, separators=(",", ":")).replace("</", "<\\/"),
             "__BLOB__": base64.b64encode(blob).decode("ascii"), "__JS__": _asset("timeline.js")}
    # one pass: a value (a title, the blob) is never scanned for another placeholder
    return re.sub(r"__[A-Z]+__", lambda m: parts.get(m.group(0), m.group(0)), _PAGE)

def write_html(est: Estimate, path: str, title: str = "", analysis: Any = None,
               summary: Optional[KernelSummary] = None) -> None:
    """Write ``render_html`` to ``path``."""
    write_text(path, render_html(est, title, analysis, summary))
