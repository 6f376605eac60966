"""SBUF spills of the new NKI API: when automatically allocated tiles do not fit, the compiler
stores some to HBM and reloads them before their next use (hardware.md: "When SBUF overflows, the
compiler inserts spill/reload DMAs to HBM (extra traffic)").

The compiler's choice of victims is not documented.  trnsim evicts, at each point where a tile
needs room, the resident tiles whose next use is farthest away (Belady's rule: the fewest
reloads), storing a victim only if it was written since it was last loaded.  The result is a lower
bound on the spill traffic; the DMAs are inserted into the trace (``attrs`` ``spill``) so the timing
model queues them like any other transfer.  What the model leaves out: the tile that needed the room
does not wait for the victim's store to finish (regions of different tiles never conflict).
"""
from __future__ import annotations

import bisect
import heapq
from typing import Dict, List, Tuple

from ...ir.trace import Instruction, Region, reserve_synthetic_ids


class Plan:
    """Spill stores and reloads, as (insert before position, 'store' | 'load', tile id)."""

    def __init__(self):
        self.moves: List[Tuple[int, str, int]] = []
        self.bytes_per_partition = 0
        self.unresolved = 0   # bytes per partition over capacity that no eviction could free


def plan_spills(intervals: Dict[int, list], accesses: Dict[int, list], capacity: int,
                reserved: int) -> Plan:
    """``intervals``: tile -> [first, last, bytes per partition, ...]; ``accesses``: tile ->
    sorted (position, is_write) of every instruction touching it."""
    plan = Plan()
    times: Dict[int, List[int]] = {}
    writes: Dict[int, List[int]] = {}
    events: List[Tuple[int, int]] = []
    for sid, iv in intervals.items():
        acc = accesses.get(sid, [])
        t = sorted({iv[0]} | {p for p, _ in acc})
        times[sid] = t
        writes[sid] = sorted(p for p, w in acc if w)
        for p in t:
            events.append((p, sid))
    events.sort()
    resident: Dict[int, int] = {}
    spilled: set = set()
    dirty: Dict[int, bool] = {}
    ends: List[Tuple[int, int]] = []  # heap of (last use, tile) of resident tiles
    used = reserved
    i = 0
    n = len(events)
    while i < n:
        p = events[i][0]
        group = []
        while i < n and events[i][0] == p:
            group.append(events[i][1])
            i += 1
        while ends and ends[0][0] < p:  # tiles whose last use is behind us leave SBUF
            _, sid = heapq.heappop(ends)
            if sid in resident:
                used -= resident.pop(sid)
        here = set(group)
        for sid in group:
            if sid in resident:
                continue
            need = intervals[sid][2]
            if sid in spilled:
                plan.moves.append((p, "load", sid))
                plan.bytes_per_partition += need
                spilled.discard(sid)
                dirty[sid] = False
            else:
                dirty[sid] = True  # a new tile holds values only SBUF has once it is written
            while used + need > capacity:
                victim = _farthest(resident, here, times, p)
                if victim is None:
                    plan.unresolved = max(plan.unresolved, used + need - capacity)
                    break
                used -= resident.pop(victim)
                t = times[victim]
                prev = t[bisect.bisect_left(t, p) - 1]  # its last use before p
                if dirty.get(victim, True):
                    plan.moves.append((prev + 1, "store", victim))
                    plan.bytes_per_partition += intervals[victim][2]
                spilled.add(victim)
            resident[sid] = need
            used += need
            heapq.heappush(ends, (intervals[sid][1], sid))
        for sid in group:
            if sid in resident and _written_at(writes[sid], p):
                dirty[sid] = True
    plan.moves.sort(key=lambda m: (m[0], 0 if m[1] == "store" else 1))
    return plan


def _farthest(resident: Dict[int, int], here: set, times: Dict[int, List[int]], p: int):
    best, best_next = None, -1
    for sid in resident:
        if sid in here:
            continue
        t = times[sid]
        j = bisect.bisect_right(t, p)
        nxt = t[j] if j < len(t) else 1 << 62
        if nxt > best_next:
            best, best_next = sid, nxt
    return best


def _written_at(w: List[int], p: int) -> bool:
    j = bisect.bisect_left(w, p)
    return j < len(w) and w[j] == p


def spill_instructions(plan: Plan, tiles: Dict[int, Tuple[str, int, int, object]], core: int
                       ) -> List[Tuple[int, Instruction]]:
    """The DMA instructions of a plan: ``tiles``: id -> (name, partitions, bytes per partition,
    source location).  Each spilled tile gets its own HBM scratch (a synthetic allocation)."""
    scratch: Dict[int, int] = {}
    out = []
    for pos, kind, sid in plan.moves:
        name, parts, row, loc = tiles[sid]
        if sid not in scratch:
            scratch[sid] = -reserve_synthetic_ids(1)
        sb = Region("sbuf", sid, name, 0, parts, 0, row, parts * row, "uint8", row)
        hb = Region("hbm", scratch[sid], f"{name}.spill", 0, 1, 0, parts * row, parts * row,
                    "uint8", parts * row)
        reads, writes = ((sb,), (hb,)) if kind == "store" else ((hb,), (sb,))
        out.append((pos, Instruction(0, "dma", "dma_copy", reads, writes, parts, row, "uint8",
                                     "uint8", (("spill", kind),), loc, core)))
    return out
