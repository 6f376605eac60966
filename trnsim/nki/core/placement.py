"""Physical placement of automatically allocated SBUF tiles: the byte offset the compiler's allocator
gives each tile in the partition, for the timing model's dependencies (issue 13 s.1).

NKI's block-dimension notes say the compiler "analyzes the memory dependency and allocates a
physical address to each tile", that tiles of a loop "may not be alive in the memory
simultaneously", that with one physical tile "the execution is completely serialized" and that with
two the load of the next tile "can overlap" the compute on this one [MIGR-BLOCK].  trnsim gave
every allocation a private buffer (unlimited multi-buffering); the policy here (``[vN.sbuf]
placement`` in cores.toml) decides instead:

- ``private``: no physical map; every tile keeps its own storage (today's timelines).
- ``site_buffers``: the tiles one source line allocates (a loop's tile, iteration after
  iteration) rotate through ``loop_buffers`` physical copies of their own: the k-th tile of a site
  takes copy k mod n, so its first write waits for the last reader of the tile n iterations
  earlier (n = 1: iterations serialized; 2: double buffering).  Sites never share bytes.
- ``reuse_lru``: walked in program order over the live ranges the capacity accountant computed
  (memory.py), a new tile takes the free byte range released longest ago that holds it (never-used
  bytes count as oldest; if no single range does, the run of adjacent free ranges whose newest
  release is oldest).  With room to spare, tiles
  rotate through many copies and reuse bytes released long ago (the dependency is long satisfied);
  when a loop's tiles fill the partition, the next iteration reuses the bytes the previous one
  just released, and its first write waits for their last reader (write-after-read).

The allocator's real algorithm is not public; this is the choice, recorded with its reason in
cores.toml.  Manual placements keep their addresses (automatic tiles go above them, as the capacity
check reserves [0, manual end)); a tile that finds no free range keeps its private storage.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from ...hardware.rules import PLACEMENT_POLICIES as POLICIES  # noqa: F401  (names a file may use)
from .liveness import range_events

# free ranges beyond this many are merged with their address neighbours (the later release kept) so
# the search stays short on kernels with thousands of differently sized tiles; merging only makes a
# range look more recently released, never frees bytes still in use
_MAX_FREE_RANGES = 128


def place_lru(ranges: Iterable[Tuple[int, int, int, int]], capacity: int,
              reserved: int = 0) -> Dict[int, int]:
    """Byte offset per tile id of (first, last, bytes, id) live ranges in a partition of
    ``capacity`` bytes above ``reserved``, reusing the least recently released bytes first."""
    events = range_events(ranges)   # at one position releases come before allocations
    free = FreeList(reserved, capacity)
    out: Dict[int, int] = {}
    for pos, alloc, nbytes, sid in events:
        if alloc:
            at = free.take(nbytes)
            if at is not None:
                out[sid] = at
        elif sid in out:
            free.release(out[sid], out[sid] + nbytes, pos)
    return out


def place_by_site(intervals: Dict[int, list], buffers: int, reserved: int = 0) -> Dict[int, int]:
    """Byte offset per tile id of ``intervals`` (id -> [first, last, bytes, name, loc]): each
    allocation site (source line) gets ``buffers`` copies of its largest tile, above ``reserved``;
    its tiles, in allocation order, take copy k mod ``buffers``.  Offsets may pass the partition's
    capacity: they key dependencies only (the capacity check is the accountant's)."""
    sites: Dict[object, List[Tuple[int, int, int]]] = {}
    for sid, iv in intervals.items():
        loc = iv[4]
        key = (loc.file, loc.line) if loc is not None else ("", -sid)   # no site: a copy of its own
        sites.setdefault(key, []).append((iv[0], sid, iv[2]))
    out: Dict[int, int] = {}
    base = reserved
    for key in sorted(sites, key=lambda k: min(t[0] for t in sites[k])):
        tiles = sorted(sites[key])
        size = max(t[2] for t in tiles)
        for k, (_, sid, _) in enumerate(tiles):
            out[sid] = base + (k % buffers) * size
        base += min(buffers, len(tiles)) * size
    return out


class FreeList:
    """Free byte ranges [lo, hi, released at] of one partition, oldest release first (never-used
    bytes count as released at -1).  Releases come in program order, so appending keeps the order."""

    def __init__(self, lo: int, hi: int):
        self.ranges: List[List[int]] = [[lo, hi, -1]] if hi > lo else []

    def take(self, size: int):
        """Carve ``size`` bytes from the oldest range that holds them alone, else from the run of
        address-adjacent ranges whose newest release is oldest; None when nothing fits."""
        if size <= 0:
            return None
        rs = self.ranges
        for k, r in enumerate(rs):
            if r[1] - r[0] >= size:
                lo = r[0]
                r[0] += size
                if r[0] == r[1]:
                    del rs[k]
                return lo
        return self._take_joined(size)

    def _take_joined(self, size: int):
        by = sorted(self.ranges)
        best = None
        for i in range(len(by)):
            start, end, newest, j = by[i][0], by[i][1], by[i][2], i
            while end - start < size and j + 1 < len(by) and by[j + 1][0] == end:
                j += 1
                end, newest = by[j][1], max(newest, by[j][2])
            if end - start >= size and (best is None or newest < best[0]):
                best = (newest, i, j)
        if best is None:
            return None
        _, i, j = best
        start = by[i][0]
        for r in by[i:j]:
            self.ranges.remove(r)
        last = by[j]
        last[0] = start + size
        if last[0] >= last[1]:
            self.ranges.remove(last)
        return start

    def take_at(self, lo: int, size: int) -> None:
        """Carve exactly [lo, lo + size) out of the free ranges (the caller knows it is free,
        possibly spread over several address-adjacent ranges): the spill planner's chosen window."""
        hi = lo + size
        keep: List[List[int]] = []
        for r in self.ranges:
            if r[1] <= lo or hi <= r[0]:
                keep.append(r)
                continue
            if r[0] < lo:
                keep.append([r[0], lo, r[2]])
            if hi < r[1]:
                keep.append([hi, r[1], r[2]])
        self.ranges = keep

    def release(self, lo: int, hi: int, when: int) -> None:
        """Return bytes [lo, hi) released at position ``when`` (a neighbour released at the same
        position grows instead of a new range)."""
        rs = self.ranges
        for k in range(len(rs) - 1, -1, -1):
            r = rs[k]
            if r[2] != when:
                break
            if r[1] == lo:
                r[1] = hi
                return
            if r[0] == hi:
                r[0] = lo
                return
        rs.append([lo, hi, when])
        if len(rs) > _MAX_FREE_RANGES:
            self._compact()

    def _compact(self) -> None:
        """Merge address-adjacent ranges, keeping the later release (see _MAX_FREE_RANGES)."""
        merged: List[List[int]] = []
        for r in sorted(self.ranges):
            if merged and merged[-1][1] == r[0]:
                merged[-1][1] = r[1]
                merged[-1][2] = max(merged[-1][2], r[2])
            else:
                merged.append(list(r))
        merged.sort(key=lambda r: r[2])
        self.ranges = merged


def synthesized_ranges(instructions, known: Dict[int, list]) -> Dict[int, Tuple[int, int, int]]:
    """(first, last, bytes) of the body-local tiles of fast-forwarded iterations (trace.LoopBlock),
    which no accountant saw: the recorded iteration just before each block, shifted by whole
    iterations (the body is regular, so a full run gives these ranges).  ``known``: id -> [first,
    last, bytes, ...] of the tiles that were recorded."""
    out: Dict[int, Tuple[int, int, int]] = {}
    for first, seg in instructions.segments():
        if isinstance(seg, list) or not hasattr(seg, "local_id") or not seg.nlocal:
            continue
        L = len(seg.template)
        rank_id: Dict[int, int] = {}
        for ins, d in zip(instructions[first - L:first], seg.deltas):
            for r, dl in zip(ins.reads + ins.writes, d):
                if dl[3] >= 0 and r.memory == "sbuf":
                    rank_id.setdefault(dl[3], r.tensor)
        for rank, tid in rank_id.items():
            iv = known.get(tid) or out.get(tid)
            if iv is None:   # never read, or another kernel instance's tile
                continue
            f, last, nbytes = iv[0], iv[1], iv[2]
            for c in range(seg.count):
                shift = (c + 1) * L   # synthesized iteration c follows the recorded one by c + 1
                out[seg.local_id(c, rank)] = (f + shift, last + shift, nbytes)
    return out
