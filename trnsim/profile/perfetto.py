"""Chrome trace-event JSON (the format ui.perfetto.dev and chrome://tracing open) from an Estimate.

Per core two processes: "NC0" holds the compute engines (named as the engine table shows them,
"Tensor (PE)" ...), a "Notes" thread with the labelled fixed-cost gaps, the SBUF / PSUM occupancy
counter tracks and the critical path as flow arrows; "NC0 DMA" holds the 16 DMA queues as its
threads, so the UI groups them in one row that expands.  Sort-index metadata puts the compute
engines first.  DMA slices carry bytes, contiguous bytes per partition, efficiency and queue.

A long kernel makes more slices than the Perfetto UI loads; the writer keeps the first
``max_instructions`` instructions of each core (by default as many as fit in ``DEFAULT_MAX_SLICES``
slices; 0 keeps all) and says so in ``otherData``.  Events are streamed to the file."""
from __future__ import annotations

import itertools
import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..outputs import atomic_output, dumps_strict
from ..ir.engines import ENGINE_ORDER
from ..timing.estimate import Estimate
from .summary import KernelSummary, summarize
from .events import (TRACK_ORDER, TRACK_NAME, _detail, _src, analyses, dma_args, dma_columns,
                     engine_display)

# the Perfetto UI's JSON importer handles a few hundred MB; a slice takes ~250 bytes
DEFAULT_MAX_SLICES = 1_000_000
NOTES = "Notes"                     # the thread of the labelled fixed-cost gaps
FLOW_NAME, FLOW_CAT = "critical path", "critical_path"
COUNTERS = (("sbuf", "SBUF occupancy"), ("psum", "PSUM occupancy"))
COUNTER_ARG = "bytes per partition"


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


def pids(core: int) -> Tuple[int, int]:
    """(compute process, DMA process) ids of a core."""
    return 2 * core + 1, 2 * core + 2


def thread_ids() -> Dict[str, int]:
    """Thread id per engine track name (PE, DVE, ...) and for the notes thread; DMA queue q is q+1."""
    tid = {TRACK_NAME[e]: k + 1 for k, e in enumerate(TRACK_ORDER)}
    tid[NOTES] = len(tid) + 1
    return tid


def _metadata(est: Estimate) -> List[Dict[str, Any]]:
    meta: List[Dict[str, Any]] = []
    tids = thread_ids()

    def add(pid, name, args, tid=None):
        ev = {"ph": "M", "pid": pid, "name": name, "args": args}
        if tid is not None:
            ev["tid"] = tid
        meta.append(ev)
    for c in est.cores:
        pc, pd = pids(c.core)
        add(pc, "process_name", {"name": f"NC{c.core} ({est.target}, {c.spec.name})"})
        add(pc, "process_sort_index", {"sort_index": 2 * c.core})
        add(pd, "process_name", {"name": f"NC{c.core} DMA ({c.spec.dma_engines} queues)"})
        add(pd, "process_sort_index", {"sort_index": 2 * c.core + 1})
        for e in TRACK_ORDER:
            t = tids[TRACK_NAME[e]]
            add(pc, "thread_name", {"name": engine_display(e)}, t)
            add(pc, "thread_sort_index", {"sort_index": t}, t)
        add(pc, "thread_name", {"name": NOTES}, tids[NOTES])
        add(pc, "thread_sort_index", {"sort_index": tids[NOTES]}, tids[NOTES])
        for q in range(c.spec.dma_engines):
            add(pd, "thread_name", {"name": f"DMA q{q}"}, q + 1)
            add(pd, "thread_sort_index", {"sort_index": q + 1}, q + 1)
    return meta


def _us(ns: float) -> float:
    return round(ns / 1e3, 6)


def _slices(est: Estimate, limit: int, found: Dict[int, dict]) -> Iterator[str]:
    """Every slice as encoded JSON (formatted directly: the encoder was most of the write time);
    a DMA is one slice per queue it used, with the transfer's figures."""
    enc = json.JSONEncoder(ensure_ascii=False).encode
    tids = thread_ids()
    for c in est.cores:
        pc, pd = pids(c.core)
        tl, dp = c.timeline, c.timeline.dma_parts
        n = len(c.trace) if not limit else min(limit, len(c.trace))
        cols = dma_columns(est, c.core, found.get(c.core))
        row = {i: k for k, i in enumerate(cols["ins"].tolist())}
        start, busy, codes = tl.start[:n].tolist(), tl.busy_end[:n].tolist(), tl.engine_code[:n].tolist()
        order = np.argsort(dp.ins, kind="stable")    # placement groups by instruction
        g_ins = dp.ins[order].tolist()
        g_s, g_e = dp.start[order].tolist(), dp.end[order].tolist()
        off, queues = dp.off.tolist(), np.asarray(dp.queue).tolist()
        g_at = [off[g] for g in order.tolist()]
        g_to = [off[g + 1] for g in order.tolist()]
        gp = 0
        names: Dict[str, str] = {}
        srcs: Dict[Any, str] = {}
        what = [(tids[TRACK_NAME[e]], TRACK_NAME[e]) if e in TRACK_ORDER else None for e in ENGINE_ORDER]
        for i, ins in enumerate(itertools.islice(c.trace.instructions, n)):
            nm = names.get(ins.opcode) or names.setdefault(ins.opcode, enc(ins.opcode))
            src = srcs.get(ins.source) or srcs.setdefault(ins.source, enc(_src(ins)))
            args = f'"source":{src},"instruction":{i},"detail":{enc(_detail(ins))}'
            w = what[codes[i]]
            if w is not None:
                yield (f'{{"ph":"X","pid":{pc},"tid":{w[0]},"name":{nm},"cat":"{w[1]}",'
                       f'"ts":{_us(start[i])},"dur":{_us(max(busy[i] - start[i], 0.0))},"args":{{{args}}}}}')
                continue
            while gp < len(g_ins) and g_ins[gp] < i:
                gp += 1
            k = row.get(i)
            # the transfer's figures once; only the queue differs between its slices
            extra = "".join(f',"{a}":{v}' for a, v in dma_args(cols, k, 0).items()
                            if a != "queue") if k is not None else ""
            while gp < len(g_ins) and g_ins[gp] == i:
                ts, dur = _us(g_s[gp]), _us(max(g_e[gp] - g_s[gp], 0.0))
                for q in queues[g_at[gp]:g_to[gp]]:
                    yield (f'{{"ph":"X","pid":{pd},"tid":{q + 1},"name":{nm},"cat":"DMA",'
                           f'"ts":{ts},"dur":{dur},"args":{{{args}{extra},"queue":{q}}}}}')
                gp += 1


def _notes(est: Estimate, found: Dict[int, dict]) -> Iterator[Dict[str, Any]]:
    """Fixed-cost gaps as labelled slices on the notes thread; occupancy as counter events."""
    tid = thread_ids()[NOTES]
    for core, a in found.items():
        pc = pids(core)[0]
        for g in a.get("dma", {}).get("fixed_gaps", ()):
            yield {"ph": "X", "pid": pc, "tid": tid, "name": g["label"], "cat": "gap",
                   "ts": _us(g["start_ns"]), "dur": _us(max(g["dur_ns"], 0.0)),
                   "args": {"note": "fixed cost: no engine or queue moves this kernel's data"}}
        for key, name in COUNTERS:
            occ = a.get("occupancy", {}).get(key)
            if not occ:
                continue
            for t, v in zip(occ["t_ns"], occ["bytes_per_partition"]):
                yield {"ph": "C", "pid": pc, "name": name, "ts": _us(t), "args": {COUNTER_ARG: v}}


def _anchor(est: Estimate, core: int, limit: int):
    """instruction -> (pid, tid, ts, dur) of the slice a flow arrow binds to (a DMA: its first
    queue's slice), for the instructions the trace keeps."""
    c = est.cores[core]
    tl = c.timeline
    pc, pd = pids(core)
    tids = thread_ids()
    dp = tl.dma_parts
    first_q = {}
    if len(dp.ins):
        u, g = np.unique(dp.ins, return_index=True)
        first_q = dict(zip(u.tolist(), np.asarray(dp.queue)[dp.off[g]].tolist()))
        first_g = dict(zip(u.tolist(), g.tolist()))

    def at(i: int):
        if i < 0 or i >= len(c.trace) or (limit and i >= limit):
            return None
        eng = ENGINE_ORDER[int(tl.engine_code[i])]
        if eng not in TRACK_ORDER:
            if i not in first_q:
                return None
            g = first_g[i]
            return pd, first_q[i] + 1, _us(float(dp.start[g])), _us(float(dp.end[g] - dp.start[g]))
        s = float(tl.start[i])
        return pc, tids[TRACK_NAME[eng]], _us(s), _us(max(float(tl.busy_end[i]) - s, 0.0))
    return at


def _flows(est: Estimate, limit: int, found: Dict[int, dict]) -> Iterator[Dict[str, Any]]:
    """One arrow per consecutive pair on each core's critical path: an "s" event inside the
    earlier slice and an "f" event (binding point "e": the enclosing slice) inside the later."""
    fid = 0
    for core, a in sorted(found.items()):
        at = _anchor(est, core, limit)
        path = [at(int(p["instruction"])) for p in a.get("critical_path", ())]
        for src, dst in zip(path, path[1:]):
            if src is None or dst is None:
                continue
            fid += 1
            for ph, (pid, tid, ts, dur) in (("s", src), ("f", dst)):
                ev = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "name": FLOW_NAME,
                      "cat": FLOW_CAT, "ts": round(ts + dur / 2, 6)}  # mid-slice: never on a boundary
                if ph == "f":
                    ev["bp"] = "e"
                yield ev


def _other(est: Estimate, limit: int, summary: Optional[KernelSummary] = None) -> Dict[str, Any]:
    total = max((len(c.trace) for c in est.cores), default=0)
    s = summary if summary is not None else summarize(est)
    other: Dict[str, Any] = {"generator": "trnsim", "summary": s.to_dict()}
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


def _all(est: Estimate, limit: int, found: Dict[int, dict]) -> Iterator[str]:
    """Every event, JSON-encoded."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for ev in _metadata(est):
        yield dumps(ev)
    yield from _slices(est, limit, found)
    for ev in _notes(est, found):
        yield dumps(ev)
    for ev in _flows(est, limit, found):
        yield dumps(ev)


def trace_events(est: Estimate, max_instructions: Optional[int] = None,
                 analysis: Any = None, summary: Optional[KernelSummary] = None) -> Dict[str, Any]:
    """The whole document as a dict (for small traces and tests).  ``analysis``: the
    ``insight.analyze`` dict (or a list, one per core); None computes it, False leaves it out;
    ``summary``: ``summarize(est)`` when the caller has it already."""
    limit = _limit(est, max_instructions)
    return {"traceEvents": [json.loads(e) for e in _all(est, limit, analyses(est, analysis))],
            "displayTimeUnit": "ns", "otherData": _other(est, limit, summary)}


def write_perfetto(est: Estimate, path: str, max_instructions: Optional[int] = None,
                   analysis: Any = None, summary: Optional[KernelSummary] = None) -> None:
    """Stream the document to ``path`` (the first ``max_instructions`` of each core; 0: all);
    ``analysis`` and ``summary`` as for ``trace_events``."""
    limit = _limit(est, max_instructions)
    with atomic_output(path) as f:
        f.write('{"traceEvents":[')
        sep = ""
        buf: List[str] = []
        for ev in _all(est, limit, analyses(est, analysis)):
            buf.append(ev)
            if len(buf) >= 4096:
                f.write(sep + ",".join(buf))
                sep = ","
                buf.clear()
        if buf:
            f.write(sep + ",".join(buf))
        f.write('],"displayTimeUnit":"ns","otherData":')
        f.write(dumps_strict(_other(est, limit, summary), separators=(",", ":"), default=str))
        f.write("}")
