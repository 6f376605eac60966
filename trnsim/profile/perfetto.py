"""Chrome trace-event JSON (opens in ui.perfetto.dev or chrome://tracing): one thread per engine and
per DMA queue, each instruction a complete ("X") slice carrying its kernel source line.

A long kernel makes tens of millions of slices (every DMA is one slice per queue it uses), more
than the Perfetto UI loads; the writer keeps the first ``max_instructions`` instructions of each
core (by default as many as fit in ``DEFAULT_MAX_SLICES`` slices; 0 keeps all) and says so in ``otherData``.  Events are
streamed to the file, not built as one list."""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
from ..timing.estimate import Estimate
from .events import events, tracks

# the Perfetto UI's JSON importer handles a few hundred MB; a slice takes ~250 bytes
DEFAULT_MAX_SLICES = 1_000_000


def instruction_limit(est: Estimate, max_slices: int = DEFAULT_MAX_SLICES) -> int:
    """How many leading instructions per core fit in ``max_slices`` slices (every core's first
    ``n`` instructions are kept; a DMA is one slice per queue it uses).  0: all fit."""
    keep = None
    total = 0
    for c in est.cores:
        n = len(c.trace)
        per = np.ones(n, dtype=np.int64)
        dp = c.timeline.dma_parts
        if len(dp.ins):
            per[dp.ins] = 0
            np.add.at(per, dp.ins, np.diff(dp.off))
        cum = np.cumsum(per)
        total = max(total, int(cum[-1]) if n else 0)
        k = int(np.searchsorted(cum, max_slices // max(1, len(est.cores)), side="right"))
        keep = k if keep is None else min(keep, k)
    return 0 if keep is None or total * len(est.cores) <= max_slices else max(1, keep)


def _metadata(est: Estimate):
    names = tracks(est)
    tid = {n: i + 1 for i, n in enumerate(names)}
    pids = {f"NC{c.core}": c.core for c in est.cores}
    meta: List[Dict[str, Any]] = []
    for c in est.cores:
        meta.append({"ph": "M", "pid": c.core, "name": "process_name",
                     "args": {"name": f"NC{c.core} ({est.target}, {c.spec.name})"}})
    for n in names:
        pid = pids[n.split(":")[0]]
        meta.append({"ph": "M", "pid": pid, "tid": tid[n], "name": "thread_name",
                     "args": {"name": n}})
        meta.append({"ph": "M", "pid": pid, "tid": tid[n], "name": "thread_sort_index",
                     "args": {"sort_index": tid[n]}})
    return meta, tid, pids


def _slices(est: Estimate, tid, pids, limit: int) -> Iterator[Dict[str, Any]]:
    for ev in events(est, limit=limit):
        nc, cat = ev.track.split(":")[:2]
        yield {"ph": "X", "pid": pids[nc], "tid": tid[ev.track], "name": ev.name, "cat": cat,
               "ts": round(ev.start_ns / 1e3, 6), "dur": round(max(ev.dur_ns, 0.0) / 1e3, 6),
               "args": {"source": ev.source, "instruction": ev.index, "detail": ev.detail}}


def _other(est: Estimate, limit: int) -> Dict[str, Any]:
    total = max((len(c.trace) for c in est.cores), default=0)
    other: Dict[str, Any] = {"generator": "trnsim", "summary": est.summary()}
    if limit and total > limit:
        other["truncated"] = {"instructions_shown_per_core": limit,
                              "instructions_per_core": total}
    return other


def _limit(est: Estimate, max_instructions: Optional[int]) -> int:
    return instruction_limit(est) if max_instructions is None else max_instructions


def shown(est: Estimate, max_instructions: Optional[int] = None) -> Optional[int]:
    """Instructions per core the trace keeps, or None when it keeps them all."""
    limit = _limit(est, max_instructions)
    return limit if limit and any(len(c.trace) > limit for c in est.cores) else None


def trace_events(est: Estimate, max_instructions: Optional[int] = None) -> Dict[str, Any]:
    """The whole document as a dict (for small traces and tests)."""
    limit = _limit(est, max_instructions)
    meta, tid, pids = _metadata(est)
    return {"traceEvents": meta + list(_slices(est, tid, pids, limit)), "displayTimeUnit": "ns",
            "otherData": _other(est, limit)}


def write_perfetto(est: Estimate, path: str, max_instructions: Optional[int] = None) -> None:
    """Stream the document to ``path`` (the first ``max_instructions`` of each core; 0: all)."""
    limit = _limit(est, max_instructions)
    meta, tid, pids = _metadata(est)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    with open(path, "w") as f:
        f.write('{"traceEvents":[')
        sep = ""
        buf: List[str] = [dumps(ev) for ev in meta]
        for ev in _slices(est, tid, pids, limit):
            buf.append(dumps(ev))
            if len(buf) >= 4096:
                f.write(sep + ",".join(buf))
                sep = ","
                buf.clear()
        if buf:
            f.write(sep + ",".join(buf))
        f.write('],"displayTimeUnit":"ns","otherData":')
        f.write(json.dumps(_other(est, limit), separators=(",", ":"), default=str))
        f.write("}")
