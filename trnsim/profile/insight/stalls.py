"""Why engines wait: per-instruction stall attribution and the critical path, from the Timeline's
times and its dependency graph (numpy over all instructions; Python only for the path walk)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from ...timing.timeline import DepGraph
from .table import CODE_LABEL, DMA_CODE, InstrTable

# attribution keys past the engine codes: DMA queue q is QUEUE0 + q
START_UP = len(CODE_LABEL)
CONTENTION = START_UP + 1
FIXED_DMA = START_UP + 2
QUEUE0 = START_UP + 3
# times closer than this (ns) count as equal: the scheduler adds and compares floats
EPS = 1e-6


@dataclass(frozen=True)
class Binding:
    """Per instruction: the dependency that finished last (-1: none), when it let the
    instruction go (its end plus the cross-engine semaphore), the previous instruction on the
    same compute engine (-1: none) and the first DMA queue of each DMA instruction."""
    dep: np.ndarray
    ready: np.ndarray
    prev: np.ndarray
    queue: np.ndarray


def _graph(tl) -> DepGraph:
    deps = tl.deps
    if deps is None:
        return DepGraph(np.zeros(len(tl.start) + 1, np.int64), np.zeros(0, np.int32))
    return deps if isinstance(deps, DepGraph) else DepGraph.from_lists(deps)


def binding(tl, sync_ns: float) -> Binding:
    """The Binding arrays of a Timeline (``sync_ns``: the cross-engine semaphore latency)."""
    n = len(tl.start)
    g = _graph(tl)
    code = tl.engine_code
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.indptr))
    col = g.indices.astype(np.int64)
    val = tl.end[col] + np.where(code[col] != code[row], sync_ns, 0.0)
    dep = np.full(n, -1, dtype=np.int64)
    ready = np.zeros(n)
    if len(col):
        o = np.lexsort((val, row))           # per row ascending value: the last one binds
        last = np.append(row[o][1:] != row[o][:-1], True)
        pick = o[last]
        dep[row[pick]] = col[pick]
        ready[row[pick]] = val[pick]
    prev = np.full(n, -1, dtype=np.int64)
    for c in range(len(CODE_LABEL)):
        if c == DMA_CODE:
            continue
        idx = np.flatnonzero(code == c)
        idx = idx[np.argsort(tl.start[idx], kind="stable")]  # issue order (timing/reorder.py)
        prev[idx[1:]] = idx[:-1]
    queue = np.full(n, -1, dtype=np.int64)
    dp = tl.dma_parts
    if len(dp.ins):
        queue[dp.ins] = np.asarray(dp.queue, dtype=np.int64)[dp.off[:-1]]
    return Binding(dep, ready, prev, queue)


def key_label(k: int) -> str:
    """Display name of an attribution key."""
    if k == START_UP:
        return "start-up"
    if k == CONTENTION:
        return "contention (shared ports / PE throttle)"
    if k == FIXED_DMA:
        return "fixed DMA latency"
    if k >= QUEUE0:
        return f"DMA:q{k - QUEUE0}"
    return CODE_LABEL[k]


def _dep_key(b: Binding, code: np.ndarray, dep: np.ndarray) -> np.ndarray:
    k = code[dep].astype(np.int64)
    q = b.queue[dep]
    return np.where((k == DMA_CODE) & (q >= 0), QUEUE0 + q, k)


def stalls(tab: InstrTable, tl, b: Binding, top: int) -> Dict[str, dict]:
    """Per compute engine that ran anything, and for the DMA queues together ('DMA'): busy and
    idle time, what the idle time waited on (the dependency that finished last, by its engine or
    DMA queue; 'start-up' before a first instruction nothing explains; contention when the engine
    and the inputs were both ready; for DMA, the fixed descriptor latency; the time after the
    last instruction to the end of the run), and the ``top`` longest waits."""
    lat = float(tl.end.max()) if len(tl.end) else 0.0
    code = tl.engine_code
    out: Dict[str, dict] = {}
    for c in range(len(CODE_LABEL)):
        idx = np.flatnonzero(code == c)
        if not len(idx):
            continue
        if c == DMA_CODE:
            # the queues as one resource: a gap is a span with no transfer moving data, charged to
            # the transfer that ends it
            idx = idx[np.lexsort((tl.busy_end[idx], tl.start[idx]))]
            reach = np.maximum.accumulate(tl.busy_end[idx])
            free = np.concatenate(([0.0], reach[:-1]))
            busy = float(tl.dma_parts.active_ns())
            first = np.zeros(len(idx), dtype=bool)
            first[0] = True
            rest_code = FIXED_DMA
        else:
            p = b.prev[idx]
            free = np.where(p >= 0, tl.busy_end[np.maximum(p, 0)], 0.0)
            busy = float((tl.busy_end[idx] - tl.start[idx]).sum())
            first = p < 0
            rest_code = CONTENTION
        out[CODE_LABEL[c]] = _attribute(tab, tl, b, idx, free, first, rest_code, busy, lat, top)
    return out


def _attribute(tab, tl, b, idx, free, first, rest_code, busy, lat, top) -> dict:
    """The stall entry of one engine: instructions ``idx`` (in the order their engine serves
    them), each waiting from ``free`` to its start."""
    code = tl.engine_code
    st = tl.start[idx]
    gap = np.maximum(st - free, 0.0)
    d = b.dep[idx]
    has = d >= 0
    dep_wait = np.where(has, np.clip(np.minimum(st, b.ready[idx]) - free, 0.0, None), 0.0)
    dep_wait = np.minimum(dep_wait, gap)
    rest = gap - dep_wait
    keys = np.where(has, _dep_key(b, code, np.maximum(d, 0)), START_UP)
    rest_key = np.where(first & ~has, START_UP, rest_code)
    nk = int(max(keys.max(initial=0), rest_key.max(initial=0))) + 1
    # (an empty selection makes bincount return integers: add as floats)
    w = np.bincount(keys[dep_wait > EPS], weights=dep_wait[dep_wait > EPS],
                    minlength=nk).astype(np.float64)
    w = w + np.bincount(rest_key[rest > EPS], weights=rest[rest > EPS], minlength=nk)
    waiting = {key_label(k): float(w[k]) for k in np.argsort(-w, kind="stable").tolist()
               if w[k] > EPS}
    tail = lat - float(tl.busy_end[idx].max())
    if tail > EPS:
        waiting["after its last instruction"] = tail
    tops = []
    for j in np.argsort(-dep_wait, kind="stable")[:top].tolist():
        if dep_wait[j] <= EPS:
            break
        i, dj = int(idx[j]), int(d[j])
        tops.append({"instruction": i, "opcode": tab.opcode(i), "source": tab.source_str(i),
                     "wait_ns": float(dep_wait[j]),
                     "waited_on": {"instruction": dj, "engine": key_label(int(keys[j])),
                                   "opcode": tab.opcode(dj), "source": tab.source_str(dj)}})
    return {"busy_ns": busy, "idle_ns": max(lat - busy, 0.0), "waiting_on": waiting, "top": tops}


def critical_path(tab: InstrTable, tl, b: Binding, limit: int) -> Tuple[List[dict], int]:
    """From the last result back to the start: each step is the instruction's binding input, the
    previous instruction on its engine when that freed the engine later than the inputs arrived
    (for a DMA transfer: the transfer that last freed its first queue). The last ``limit`` steps (0: all), in time
    order, and the path's full length."""
    if not len(tl.end):
        return [], 0
    dep, ready = b.dep.tolist(), b.ready.tolist()
    busy_end = tl.busy_end.tolist()
    qpred = np.where(tl.engine_code == DMA_CODE, _queue_predecessor(tl), b.prev).tolist()
    path = []
    i = int(np.argmax(tl.end))
    while i >= 0:
        path.append(i)
        p = qpred[i]
        if p >= 0 and (dep[i] < 0 or busy_end[p] >= ready[i]):
            i = p
        else:
            i = dep[i]
    path.reverse()
    total = len(path)
    path = path[-limit:] if limit else path
    code = tl.engine_code
    out = []
    for i in path:
        k = int(code[i])
        eng = f"DMA:q{int(b.queue[i])}" if k == DMA_CODE and b.queue[i] >= 0 else CODE_LABEL[k]
        out.append({"instruction": i, "engine": eng, "opcode": tab.opcode(i),
                    "source": tab.source_str(i), "start_ns": float(tl.start[i]),
                    "end_ns": float(tl.end[i])})
    return out, total


def _queue_predecessor(tl) -> np.ndarray:
    """Per DMA instruction, the transfer that ended last, no later than its start, on its first
    queue (-1: none; what held it back when its inputs were ready earlier); -1 elsewhere."""
    n = len(tl.start)
    out = np.full(n, -1, dtype=np.int64)
    dp = tl.dma_parts
    if not len(dp.ins):
        return out
    reps = np.diff(dp.off)
    grp = np.repeat(np.arange(len(dp.ins)), reps)    # the placement group of each part
    p_q = np.asarray(dp.queue)
    first_q = np.full(n, -1, dtype=np.int64)
    first_q[dp.ins] = p_q[dp.off[:-1]]
    # by queue, then by end: groups sorted by end once, then a stable sort by the small queue ids
    g_order = np.argsort(dp.end, kind="stable")
    rank = np.empty(len(g_order), dtype=np.int64)
    rank[g_order] = np.arange(len(g_order))
    o = np.lexsort((rank[grp], p_q))
    p_q = p_q[o]
    p_end, p_ins = dp.end[grp[o]], dp.ins[grp[o]].astype(np.int64)
    qs, lo = np.unique(p_q, return_index=True)
    hi = np.append(lo[1:], len(p_q))
    for q, a, b in zip(qs.tolist(), lo.tolist(), hi.tolist()):
        ends, ins = p_end[a:b], p_ins[a:b]
        who = np.flatnonzero(first_q == q)
        k = np.searchsorted(ends, tl.start[who] + EPS, side="right") - 1
        self_hit = (k >= 0) & (ins[np.maximum(k, 0)] == who)   # a zero-length transfer itself
        k = k - self_hit
        out[who] = np.where(k >= 0, ins[np.maximum(k, 0)], -1)
    return out
