"""Chrome trace-event JSON (opens in ui.perfetto.dev or chrome://tracing): one thread per engine and
per DMA queue, each instruction a complete ("X") slice carrying its kernel source line."""
from __future__ import annotations

import json
from typing import Any, Dict, List

from ..timing.estimate import Estimate
from .events import events, tracks


def trace_events(est: Estimate) -> Dict[str, Any]:
    names = tracks(est)
    tid = {n: i + 1 for i, n in enumerate(names)}
    out: List[Dict[str, Any]] = []
    pids = {}
    for c in est.cores:
        pid = c.core
        pids[f"NC{c.core}"] = pid
        out.append({"ph": "M", "pid": pid, "name": "process_name",
                    "args": {"name": f"NC{c.core} ({est.target}, {c.spec.name})"}})
    for n in names:
        pid = pids[n.split(":")[0]]
        out.append({"ph": "M", "pid": pid, "tid": tid[n], "name": "thread_name", "args": {"name": n}})
        out.append({"ph": "M", "pid": pid, "tid": tid[n], "name": "thread_sort_index",
                    "args": {"sort_index": tid[n]}})
    for ev in events(est):
        out.append({"ph": "X", "pid": pids[ev.track.split(":")[0]], "tid": tid[ev.track],
                    "name": ev.name, "cat": ev.track.split(":")[1],
                    "ts": round(ev.start_ns / 1e3, 6), "dur": round(max(ev.dur_ns, 0.0) / 1e3, 6),
                    "args": {"source": ev.source, "instruction": ev.index, "detail": ev.detail}})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"generator": "trnsim", "summary": est.summary()}}


def write_perfetto(est: Estimate, path: str) -> None:
    with open(path, "w") as f:
        json.dump(trace_events(est), f, separators=(",", ":"))
