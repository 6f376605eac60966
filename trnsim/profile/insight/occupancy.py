"""SBUF and PSUM bytes per partition over time, from the live ranges the nki layer's capacity
accountant recorded (trace.meta ``sbuf_live`` / ``psum_live``: flat first, last, bytes triples by
instruction index) mapped to the Timeline's times."""
from __future__ import annotations

from typing import Dict

import numpy as np


def _ranges(trace, memory: str) -> np.ndarray:
    """(first, last, bytes) rows of ``memory``'s tiles; for each synthesized loop block, whose
    tiles the accountant never saw, the ranges lying wholly inside the last recorded iteration
    before it, repeated once per synthesized iteration."""
    flat = np.asarray(trace.meta.get(f"{memory}_live", ()), dtype=np.int64).reshape(-1, 3)
    extra = []
    for first, blk in ((f, s) for f, s in trace.instructions.segments() if not isinstance(s, list)):
        L = len(blk.template)
        lo = first - L
        inside = flat[(flat[:, 0] >= lo) & (flat[:, 1] < first)]
        if not len(inside) or lo < 0:
            continue
        shift = (np.arange(blk.count, dtype=np.int64) + 1) * L
        rep = np.repeat(inside[None, :, :], blk.count, axis=0)
        rep[:, :, 0] += shift[:, None]
        rep[:, :, 1] += shift[:, None]
        extra.append(rep.reshape(-1, 3))
    return np.concatenate([flat] + extra) if extra else flat


def series(trace, tl, memory: str, capacity: int, max_points: int) -> Dict[str, object]:
    """Step series of ``memory`` use, swept in program order as the accountant does (a tile is
    live from instruction ``first`` through ``last``; at one position frees come before
    allocations; manual placements are reserved throughout), so the peak is the capacity check's
    peak. Each change is placed at the program-order time of its position: the latest start of
    the instructions up to it (the end of the run after the last). At most ``max_points`` points;
    a point stands for the highest level at its time (or in its time bin)."""
    n = len(tl.start)
    base = int(trace.meta.get(f"{memory}_manual_bytes", 0))
    r = _ranges(trace, memory)
    if n == 0 or not len(r):
        return {"t_ns": [0.0], "bytes_per_partition": [base],
                "capacity_bytes_per_partition": int(capacity), "peak": base}
    pos = np.concatenate((np.clip(r[:, 0], 0, n), np.clip(r[:, 1] + 1, 0, n)))
    d = np.concatenate((r[:, 2], -r[:, 2]))
    o = np.lexsort((d, pos))                  # frees (negative) first at one position
    pos, d = pos[o], d[o]
    level = base + np.cumsum(d)
    when = np.append(np.maximum.accumulate(tl.start), float(tl.end.max()))
    t = np.concatenate(([0.0], when[pos]))
    level = np.concatenate(([base], level))
    starts = np.flatnonzero(np.append(True, t[1:] != t[:-1]))
    level, t = np.maximum.reduceat(level, starts), t[starts]
    # the level after the last change at the run's end (every tile freed): not its maximum
    if pos[-1] == n:
        level[-1] = base + int(d.sum())
    peak = int(level.max())
    if max_points and len(t) > max_points:
        bins = np.minimum((t / (t[-1] or 1.0) * (max_points - 1)).astype(np.int64), max_points - 1)
        starts = np.flatnonzero(np.append(True, bins[1:] != bins[:-1]))
        level = np.maximum.reduceat(level, starts)
        t = t[starts]
    return {"t_ns": t.tolist(), "bytes_per_partition": [int(x) for x in level.tolist()],
            "capacity_bytes_per_partition": int(capacity), "peak": peak}
