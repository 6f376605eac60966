"""A Perfetto (Chrome trace-event JSON) timeline of one estimated step, operator by operator: TensorE ops
(matmul, attention), vector ops and collectives on their own tracks, each slice with its shape, phase,
FLOPs, HBM bytes and user line; counters for TensorE utilization and HBM traffic."""
from __future__ import annotations

from typing import Dict, List

from ...outputs import dumps_strict, write_text
from .summary import steady_graph

_TRACKS = {"matmul": 1, "attention": 1, "collective": 3}   # everything else: track 2
_NAMES = {1: "TensorE (matmul, attention)", 2: "Vector / Scalar (norm, softmax, elementwise, optimizer)",
          3: "collectives"}


def trace_events(session) -> Dict:
    """The trace of the steady graph's estimated step as a JSON-ready dict."""
    g = steady_graph(session)
    est = g.est
    hbm = session.estimator.ctx.roof.hbm_bytes_per_s
    ev: List[Dict] = [{"ph": "M", "pid": 1, "name": "process_name",
                       "args": {"name": f"NeuronCore 0 of {est.instance} (estimated, graph {g.id})"}}]
    for tid, name in _NAMES.items():
        ev.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": name}})
    for r in est.rows:
        tid = _TRACKS.get(r.kind, 2)
        util = r.flops / (r.seconds * est.peak_flops) if r.seconds and r.kind in ("matmul", "attention") else 0.0
        bw = r.bytes / r.seconds if r.seconds else 0.0
        ts = r.start_s * 1e6
        ev.append({"ph": "X", "pid": 1, "tid": tid, "name": r.name.replace("aten::", ""), "ts": ts,
                   "dur": max(r.seconds * 1e6, 1e-3), "cat": r.phase,
                   "args": {"op": r.name, "phase": r.phase, "shape": r.shape, "flops": r.flops, "hbm_bytes": r.bytes,
                            "tensor_utilization_pct": round(100 * util, 2),
                            "hbm_bandwidth_pct": round(100 * bw / hbm, 2), "line": r.loc}})
        ev.append({"ph": "C", "pid": 1, "name": "TensorE utilization %", "ts": ts,
                   "args": {"util": round(100 * util, 2)}})
        ev.append({"ph": "C", "pid": 1, "name": "HBM traffic GB/s", "ts": ts, "args": {"GB/s": round(bw / 1e9, 2)}})
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"instance": est.instance, "graph": g.id, "step_s": est.step_s, "ops": len(est.rows),
                          "note": "one estimated step of the graph run most often; ops in program order"}}


def write_trace(session, path: str) -> None:
    """Write the trace for ui.perfetto.dev."""
    write_text(path, dumps_strict(trace_events(session), default=str))
