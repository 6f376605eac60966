"""Tiles cut into the pieces the SBUF spill planner (spill.py) moves: the byte ranges its
instructions touch, and for a block tensor its blocks, each an allocation of its own."""
from __future__ import annotations

import bisect
from typing import Dict, Optional, Tuple

__all__ = ["split_pieces"]


def split_pieces(intervals: Dict[int, list], ranges: Dict[int, list],
                 blocks: Optional[Dict[int, int]] = None):
    """Cut each tile at the byte bounds its instructions touch, so a spill moves only the piece an
    instruction needs (not a whole 128 KiB row for a 2 KiB slice).  ``ranges``: tile -> [(position,
    is_write, byte lo, byte hi)].  Returns (intervals, accesses, spans) over piece ids: every piece
    is allocated with its tile and lives to its own last access; spans: piece -> (tile, lo, hi).
    ``blocks``: block tensor -> one block's bytes: cut at block bounds too, each block its own
    allocation from its first access (the compiler's tiles); a write-only access spanning blocks
    (the zero fill) is left out of the plan, as the compiler writes each block's tile alone."""
    p_iv: Dict[int, list] = {}
    p_acc: Dict[int, list] = {}
    spans: Dict[int, Tuple[int, int, int]] = {}
    blocks = blocks or {}
    for sid, iv in intervals.items():
        row = iv[2]
        # only accesses inside the accountant's live range count (a legacy result is counted
        # from the instruction after the one that makes it, memory.py)
        acc = sorted(a for a in ranges.get(sid, ()) if iv[0] <= a[0] <= iv[1])
        one = blocks.get(sid)
        if one:
            reads = {a[0] for a in acc if not a[1]}
            acc = [a for a in acc if not (a[1] and a[0] not in reads and
                                          (a[3] - 1) // one > max(a[2], 0) // one)]
        cuts = sorted({0, row} | {min(max(b, 0), row) for _, _, lo, hi in acc for b in (lo, hi)}
                      | set(range(0, row, one or row)))
        base = len(spans)
        for k in range(len(cuts) - 1):
            spans[base + k] = (sid, cuts[k], cuts[k + 1])
            p_iv[base + k] = [iv[0], iv[0], cuts[k + 1] - cuts[k], iv[3], iv[4]]
            p_acc[base + k] = []
        for pos, write, lo, hi in acc:
            k0 = bisect.bisect_right(cuts, max(lo, 0)) - 1
            for k in range(k0, len(cuts) - 1):
                if cuts[k] >= min(hi, row):
                    break
                p_acc[base + k].append((pos, write))
                p_iv[base + k][1] = max(p_iv[base + k][1], pos)
        for k in range(len(cuts) - 1 if one else 0):   # a block is allocated at its first use
            p_iv[base + k][0] = p_acc[base + k][0][0] if p_acc[base + k] else iv[0]
    return p_iv, p_acc, spans
