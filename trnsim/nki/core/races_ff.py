"""Races inside a fast-forwarded loop, found on its LoopBlock without materializing it.

A synthesized iteration ``k`` of slot ``j`` touches the template region moved by ``k`` times its
per-iteration delta (ir/trace.py LoopBlock).  For two slots on one shared tensor whose regions move
by the same step and keep their width, whether iterations ``k1`` and ``k2`` overlap depends on the
distance ``d = k2 - k1`` only, and in each dimension the distances that overlap form an interval:
``lo < d * step < hi``.  So the check is exact and costs nothing per iteration: intersect the
two intervals (partitions / rows, bytes), keep ``0 < |d| < n``.  Slots whose steps differ, or
whose regions grow, are left to the recorded iterations (races.py).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

_NEVER = (1, 0)   # an empty distance interval


def _distances(lo: int, hi: int, step: int) -> Tuple[int, int]:
    """Integers ``d`` with ``lo < d * step < hi``, as an inclusive range (empty: lo > hi)."""
    if step == 0:
        return (-(1 << 62), 1 << 62) if lo < 0 < hi else _NEVER
    if step < 0:
        lo, hi, step = -hi, -lo, -step
    return lo // step + 1, -((-hi) // step) - 1   # floor(lo/step)+1 .. ceil(hi/step)-1


def _nearest(a: int, b: int, n: int) -> Optional[int]:
    """The distance of smallest size in ``[a, b]`` with ``0 < |d| < n``; None if there is none."""
    a, b = max(a, -(n - 1)), min(b, n - 1)
    if a > b:
        return None
    if a > 0:
        return a
    if b < 0:
        return b
    if b >= 1:
        return 1 if a <= 1 <= b else None
    return -1 if a <= -1 else None


def block_races(block, n: int, sid0: int, role_of: Callable) -> List[tuple]:
    """Racing slot pairs of ``block`` over a loop of ``n`` iterations: each
    ``((k1, role, ins, region), (k2, role, ins, region))`` with both regions placed at their
    iterations; ``role_of(ins, region, is_write)`` gives 1 (write), 2 (read) or 3 (accumulate)."""
    by_tensor: dict = {}
    for ins, deltas in zip(block.template, block.deltas):
        nr = len(ins.reads)
        for pos, (r, (dp, ds, de, rank)) in enumerate(zip(ins.reads + ins.writes, deltas)):
            t = r.tensor
            if rank >= 0 or not 0 <= t < sid0 or r.indirect or ds != de:
                continue
            role = role_of(ins, r, pos >= nr)
            if role is not None:
                by_tensor.setdefault(t, []).append((r, dp, ds, role, ins))
    out = []
    for accesses in by_tensor.values():
        got = _tensor_pair(accesses, n)
        if got is not None:
            out.append(got)
    return out


def _tensor_pair(accesses, n: int):
    for i, (ra, dpa, dsa, rola, ia) in enumerate(accesses):
        for rb, dpb, dsb, rolb, ib in accesses[i:]:
            # racing roles: a write against anything, an accumulation against a plain read
            if (dpa, dsa) != (dpb, dsb) or not (rola == 1 or rolb == 1 or {rola, rolb} == {2, 3}):
                continue
            # region b at k1 + d against region a at k1: offsets of b relative to a
            p = _distances(ra.partition - rb.partition - rb.partitions,
                           ra.partition + ra.partitions - rb.partition, dpa)
            s = _distances(ra.start - rb.stop, ra.stop - rb.start, dsa)
            d = _nearest(max(p[0], s[0]), min(p[1], s[1]), n)
            if d is None:
                continue
            k1, k2 = (0, d) if d > 0 else (-d, 0)
            return ((k1, rola, ia, _at(ra, k1, dpa, dsa)), (k2, rolb, ib, _at(rb, k2, dpb, dsb)))
    return None


def _at(r, k: int, dp: int, ds: int):
    """Region ``r`` (iteration 0) placed at iteration ``k``."""
    return r._replace(partition=r.partition + k * dp, start=r.start + k * ds,
                      stop=r.stop + k * ds)
