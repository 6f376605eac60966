"""DMA detail: the longest transfers with their bytes, contiguous chunk, efficiency and queues, a
summary over every transfer, and the fixed-cost gaps when no engine and no queue is busy."""
from __future__ import annotations

from typing import List

import numpy as np

from ...ir.opcodes import OPCODES
from .stalls import EPS
from .table import DMA_CODE, InstrTable


def _direction(ins) -> str:
    src = ins.reads[0].memory if ins.reads else "-"
    dst = ins.writes[0].memory if ins.writes else "-"
    return f"{src}->{dst}"


def transfers(tab: InstrTable, trace, tl, model, top: int) -> List[dict]:
    """The ``top`` DMA instructions by transfer time, with what the cost model saw in them."""
    idx = np.flatnonzero(tl.engine_code == DMA_CODE)
    dur = tl.end[idx] - tl.start[idx]
    order = idx[np.argsort(-dur, kind="stable")[:top]]
    dp = tl.dma_parts
    queues = {}
    if len(order):
        want = np.isin(dp.ins, order)
        for g in np.flatnonzero(want).tolist():
            queues.setdefault(int(dp.ins[g]), []).extend(
                int(q) for q in dp.queue[dp.off[g]:dp.off[g + 1]])
    out = []
    for i in order.tolist():
        ins = trace[i]
        c = model.dma(ins)
        out.append({"instruction": i, "opcode": ins.opcode, "source": tab.source_str(i),
                    "bytes": int(c.bytes), "contiguous_bytes_per_partition": int(c.chunk_bytes),
                    "efficiency": float(c.efficiency), "queues": sorted(set(queues.get(i, []))),
                    "start_ns": float(tl.start[i]), "dur_ns": float(tl.end[i] - tl.start[i]),
                    "direction": _direction(ins)})
    return out


def _shape_key(ins):
    """What ``CostModel.dma`` reads of a transfer, offsets left out (None: cost it directly)."""
    spec = OPCODES.get(ins.opcode)
    if spec is None or "collective" in spec.cost_class:  # link-figure costs read more fields
        return None
    r = ins.reads[0] if ins.reads else None
    w = ins.writes[0] if ins.writes else None
    try:
        key = (ins.opcode, ins.partitions, ins.attrs,
               r and (r.memory, r.elements, r.dtype, r.contiguous),
               w and (w.memory, w.elements, w.dtype, w.contiguous))
        hash(key)
    except TypeError:  # unhashable attribute values
        return None
    return key


def summary(trace, tl, model) -> dict:
    """Transfers, bytes and mean efficiency over every DMA instruction (a synthesized loop's
    transfers are costed once per template instruction and counted per iteration; transfers of
    the same shape are costed once)."""
    n, eff_sum, weighted, nbytes = 0, 0.0, 0.0, 0
    memo: dict = {}
    for _, seg in trace.instructions.segments():
        reps, items = (1, seg) if isinstance(seg, list) else (seg.count, seg.template)
        for ins in items:
            if ins.engine != "dma":
                continue
            key = _shape_key(ins)
            c = memo.get(key) if key is not None else None
            if c is None:
                c = model.dma(ins)
                if key is not None:
                    memo[key] = c
            n += reps
            eff_sum += reps * c.efficiency
            weighted += reps * c.efficiency * c.bytes
            nbytes += reps * c.bytes
    return {"transfers": n, "bytes": int(nbytes), "mean_efficiency": eff_sum / n if n else 0.0,
            "bytes_weighted_efficiency": weighted / nbytes if nbytes else 0.0}


def fixed_gaps(trace, tl, top: int) -> List[dict]:
    """Spans when nothing runs (no engine, no queue): 'start-up' at time 0, 'before the final
    store' ending where the last DMA into HBM starts, 'result latency' after the last busy span,
    other idle spans as 'all engines wait'; the ``top`` longest, in time order."""
    if not len(tl.start):
        return []
    lat = float(tl.end.max())
    o = np.lexsort((tl.busy_end, tl.start))
    s, e = tl.start[o], tl.busy_end[o]
    reach = np.maximum.accumulate(e)
    g_start = np.concatenate(([0.0], reach))
    g_end = np.concatenate((s, [lat]))
    keep = g_end - g_start > EPS
    g_start, g_end = g_start[keep], g_end[keep]
    dma = np.flatnonzero(tl.engine_code == DMA_CODE)
    store_at = None
    if len(dma):
        last = int(dma[np.argmax(tl.start[dma])])
        ins = trace[last]
        if any(w.memory == "hbm" for w in ins.writes):
            store_at = float(tl.start[last])
    gaps = []
    for a, b in zip(g_start.tolist(), g_end.tolist()):
        if a <= EPS:
            label = "start-up"
        elif store_at is not None and abs(b - store_at) <= EPS:
            label = "before the final store"
        elif b >= lat - EPS:
            label = "result latency (after the last busy span)"
        else:
            label = "all engines wait"
        gaps.append({"label": label, "start_ns": a, "dur_ns": b - a})
    named = [g for g in gaps if g["label"] != "all engines wait"]
    other = sorted((g for g in gaps if g["label"] == "all engines wait"),
                   key=lambda g: -g["dur_ns"])[:max(top - len(named), 0)]
    return sorted(named + other, key=lambda g: g["start_ns"])
