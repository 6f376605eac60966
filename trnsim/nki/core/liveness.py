"""Live ranges of on-chip tiles under the schedule the compiler may choose, not only program order.

Both NKI compilers schedule instructions automatically by their data dependencies: the NKI docs'
scheduling guide says extra dependency edges "constrain the reordering that the automatic scheduler
will do" and ``no_reorder`` blocks exist to switch that reordering off (nki/guides/
how-to-scheduling-apis.rst); the neuronxcc release notes add ``no_reorder`` "to enable
user-scheduling of instructions" (release-notes/prev/rn.rst, aws-neuron-sdk 4548de36).  The docs do
not say how the scheduler orders what it may reorder, so trnsim models one rule, named in
``cores.toml`` (``[vN.psum] liveness``) and overridable:

- ``program_order``: a tile is live from its allocation to the last instruction that touches it,
  in the kernel's order.
- ``hoist_last_reader``: the instruction that last touches a PSUM tile (its evacuation) moves up to
  just after the latest instruction it depends on (read-after-write, write-after-read and
  write-after-write on overlapping regions of any memory, through other moved instructions); every
  other instruction keeps its place.  A tile is live from its first write (an allocation that zeroes
  it, ``nl.zeros``, counts as a write where it was allocated) to its last access in that order.

The moved order respects every dependency, so a kernel that fits under it can be allocated by a
compiler that picks it: the rule never accepts a kernel that no order could fit.  It may refuse
kernels a cleverer scheduler would fit (it never moves producers down, nor anything else).
Not modelled: ``no_reorder`` blocks (no-ops in trnsim) still get the hoisted order; the check runs
only when program order overflows, on the whole trace (a fast-forwarded run is traced again).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set, Tuple

from ...hardware.rules import LIVENESS_RULES as RULES  # noqa: F401  (the names a data file may use)
Key = Tuple[str, int]   # (memory, tensor id)


def hoisted_ranges(instructions: Iterable, lo: int, movable: Set[int],
                   tracked: Dict[Key, int]) -> Dict[Key, List[int]]:
    """Each tracked tile's [first, last] position once the ``movable`` instructions are hoisted.

    ``instructions``: the kernel instance's instructions from position ``lo`` on, in program order;
    ``tracked``: (memory, tensor id) -> allocation position.  A moved instruction takes the
    position of the instruction it now follows (ties count as overlapping: conservative)."""
    history: Dict[Key, list] = {}   # every tensor's accesses so far: [position, region, write, new]
    ranges: Dict[Key, List[int]] = {}
    for ins in instructions:
        pos = ins.index
        new = _hoist(ins, history, lo) if pos in movable else pos
        zeroing = ins.attr("deferred_zero", False)
        for regions, write in ((ins.reads, False), (ins.writes, True)):
            for r in regions:
                key = (r.memory, r.tensor)
                history.setdefault(key, []).append((pos, r, write, new))
                alloc = tracked.get(key)
                if alloc is None:
                    continue
                # nl.zeros writes at the allocation: trnsim traces that memset at the first use
                at = alloc if zeroing else new
                rng = ranges.get(key)
                if rng is None:
                    ranges[key] = [at, max(at, new)]
                else:
                    rng[0] = min(rng[0], at)
                    rng[1] = max(rng[1], new)
    return ranges


def _hoist(ins, history: Dict[Key, list], lo: int) -> int:
    """The (new) position of the latest instruction ``ins`` depends on."""
    best = lo
    for regions, write in ((ins.reads, False), (ins.writes, True)):
        for r in regions:
            past = history.get((r.memory, r.tensor))
            if not past:
                continue
            for pos, other, other_write, new in reversed(past):
                if pos <= best:  # new <= pos: nothing older can move the answer
                    break
                # every conflicting access counts, not only the latest: a moved one may now sit
                # above older ones it does not conflict with (two reads)
                if new > best and (write or other_write) and r.overlaps(other):
                    best = new
    return best


def range_events(ranges: Iterable[Tuple[int, int, int, int]]) -> List[Tuple[int, int, int, int]]:
    """(position, 1 = allocate / 0 = release, bytes, id) events of (first, last, bytes, id) live
    ranges, in position order; at one position releases come before allocations."""
    events = []
    for first, last, nbytes, sid in ranges:
        events.append((first, 1, nbytes, sid))
        events.append((last + 1, 0, nbytes, sid))
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def sweep_peak(ranges: Iterable[Tuple[int, int, int, int]], reserved: int = 0
               ) -> Tuple[int, Optional[Tuple[int, int, set]]]:
    """Peak bytes per partition of (first, last, bytes, id) live ranges over ``reserved`` bytes,
    and (id, bytes in use, ids live) where it is first reached."""
    events = range_events(ranges)
    used, peak, at = reserved, reserved, None
    live: set = set()
    for pos, kind, nbytes, sid in events:
        if kind:
            used += nbytes
            live.add(sid)
            if used > peak:
                peak, at = used, (sid, used, set(live))
        else:
            used -= nbytes
            live.discard(sid)
    return peak, at
