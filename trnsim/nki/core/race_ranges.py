"""Instruction ranges for the race check (races.py): where recorded marks sit after fast-forward
remappings, and a trace's recorded instructions without its synthesized loop iterations."""
from __future__ import annotations

import bisect
from typing import Dict, Iterable


def _lowest_moved(trace, since: int, epoch: int) -> Dict[int, int]:
    """Per remap epoch ``e`` in ``since .. epoch``: the lowest index any remapping from ``e`` on
    moves (marks below it stand; resolving each through every later remapping is quadratic)."""
    out: Dict[int, int] = {}
    lo = None
    remaps = trace._remaps  # read-only: (lo, hi, delta) windows per remapping, oldest first
    for e in range(epoch - 1, since - 1, -1):
        w = min(a for a, _, _ in remaps[e]) if remaps[e] else None
        if w is not None:
            lo = w if lo is None else min(lo, w)
        out[e] = lo if lo is not None else 1 << 62
    return out


class _Recorded:
    """Instruction ranges of one trace, leaving out fast-forwarded loops' synthesized iterations
    (LoopBlocks): the recorded iterations around a block stand for it."""
    __slots__ = ("plain", "starts", "segs")

    def __init__(self, il):
        self.plain = il.plain_list()
        if self.plain is None:
            # read-only views of the list's segment table (``segments()`` would copy it per loop)
            self.starts = il._starts
            self.segs = il._segs

    def __call__(self, a: int, b: int) -> Iterable:
        """Recorded instructions with indices ``a .. b``."""
        if self.plain is not None:
            return self.plain[a:b]
        return self._walk(a, b)

    def _walk(self, a: int, b: int):
        starts, segs = self.starts, self.segs
        s = max(bisect.bisect_right(starts, a) - 1, 0)
        while s < len(segs) and starts[s] < b:
            seg, base = segs[s], starts[s]
            if isinstance(seg, list):
                lo, hi = max(a, base), min(b, base + len(seg))
                if lo < hi:
                    yield from seg[lo - base:hi - base]
            s += 1
