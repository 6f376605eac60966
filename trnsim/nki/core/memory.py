"""On-chip memory bookkeeping of one kernel instance: the capacity accountant of SBUF / PSUM
(compiler-style liveness, peak sweep, spill excess) and the physical buffer manual placements share."""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ...errors import CapacityError, SbufSpillWarning
from ...hardware.schema import OnChipMemory
from ...source import describe, user_loc
from .liveness import hoisted_ranges, range_events, sweep_peak
from .storage import Storage


class CopySpillRerun(Exception):
    """Raised by a check that must spill the copies the compiler inserts, or the blocks of a block
    tensor, but ran without the access record spills need; the launcher runs the kernel again
    with it (``track_spills``)."""


class Accountant:
    """Capacity of one on-chip memory, checked with compiler-style liveness."""
    # An automatically placed tensor is live from its allocation to the last instruction that reads
    # or writes it (Python references that linger after the last use do not count, as they do not
    # for the NKI compiler). Manually placed tensors reserve bytes [0, end) of their partitions. The
    # peak is found by a sweep when the kernel instance finishes (``check``).
    # That is program order. The compiler reorders (liveness.py): where the memory's ``liveness``
    # rule is ``hoist_last_reader`` and program order overflows, the check is made again under the
    # order with each tile's evacuation hoisted (nki-library bwmm_shard_on_I at LNC=2 fills
    # I_TP/2/128 PSUM accumulators and evacuates them in a later loop: 12 banks at I_TP = 3072 in
    # program order, while its docstring recommends I_TP up to 16384).

    def __init__(self, memory: str, spec: OnChipMemory):
        self.memory = memory
        self.spec = spec
        self.capacity = spec.bytes_per_partition
        self.intervals: Dict[int, list] = {}   # storage id -> [first, last, bytes, name, loc]
        self.manual_end = 0
        self.manual_names: List[str] = []
        self.peak = 0
        self.spill_excess = 0   # bytes per partition over capacity at the peak (spilled)
        # storage id -> [(instruction, is_write)], kept where spills are modelled (spill.py)
        self.accesses: Optional[Dict[int, list]] = None
        self.parts: Dict[int, int] = {}
        self.liveness_used = "program_order"   # the rule whose order the accepted peak is from
        self.placed: Optional[Dict[int, int]] = None   # a placement spill.py computed already
        # run first by ``check``: they may move tiles into this memory (a broadcast copy PSUM
        # cannot hold becomes an SBUF copy, broadcast_lowering.make_room), which must count here
        self.before_check: List[Callable[[], None]] = []
        self.copies: set = set()   # ids of the copies the compiler inserts (charge_copy)
        self.copy_spill = False    # an overflow only the inserted copies cause is spilled (check)
        # block tensors (legacy leading block dims): storage id -> bytes per partition of one
        # block; the compiler allocates each block as its own tile, so it can spill some
        self.blocks: Dict[int, int] = {}
        self.block_spill = False   # an overflow only whole block tensors cause is spilled (check)

    def charge(self, st: Storage, p0: int, parts: int, row_bytes: int, first: int) -> None:
        """Count an automatically placed storage from instruction ``first`` on."""
        st.accountant = self
        st.accounted = True
        one = self.blocks.get(st.id)
        if one is not None and one > self.capacity:
            raise CapacityError(
                f"{self.memory.upper()} tensor '{st.name}': one block alone needs {one} B per "
                f"partition", rule=f"{self.memory}-capacity",
                limit=f"{self.capacity} B per partition", value=f"{one} B per partition",
                where=describe(user_loc()))
        if one is None and row_bytes > self.capacity:
            raise CapacityError(
                f"{self.memory.upper()} tensor '{st.name}' alone needs {row_bytes} B per partition",
                rule=f"{self.memory}-capacity", limit=f"{self.capacity} B per partition",
                value=f"{row_bytes} B per partition", where=describe(user_loc()))
        self.intervals[st.id] = [first, first, row_bytes, st.name, st.loc]
        self.parts[st.id] = parts

    def charge_copy(self, sid: int, name: str, loc, parts: int, row_bytes: int,
                    first: int) -> None:
        """Count a compiler-made copy (no Storage of its own: a partition broadcast's copy) from
        instruction ``first`` on; its accesses extend it as a tile's do."""
        self.intervals[sid] = [first, first, row_bytes, name, loc]
        self.parts[sid] = parts
        self.copies.add(sid)

    def touch(self, sid: int, idx: int, write: bool = False) -> None:
        """Extend storage ``sid``'s live range to instruction ``idx``."""
        iv = self.intervals.get(sid)
        if iv is not None:
            iv[1] = idx
            if self.accesses is not None:
                self.accesses.setdefault(sid, []).append((idx, write))

    def charge_manual(self, st: Storage, p0: int, parts: int, end: int) -> None:
        """Reserve bytes [0, end) of a manually placed storage's partitions."""
        st.accountant = self
        st.accounted = True
        if end > self.manual_end:
            self.manual_end = end
        self.manual_names.append(st.name)

    def check(self, spill: bool = False, trace=None, peer: Optional["Accountant"] = None) -> None:
        """Raise if live automatically placed tensors plus manual reservations exceed capacity.
        ``spill``: the compiler spills instead (new API, SBUF): record the overflow, warn once.
        ``trace`` / ``peer`` (the other memory): for a reordering liveness rule (liveness.py)."""
        for hook in self.before_check:
            hook()
        if not spill and self.memory == "sbuf" and self._copies_overflow():
            # the kernel's own tiles fit: the compiler makes room for its own copies (it spills),
            # it does not refuse the kernel; spilling needs the accesses a spilling run records
            if self.accesses is None:
                raise CopySpillRerun()
            spill = self.copy_spill = True
        elif not spill and self.memory == "sbuf" and self._blocks_overflow():
            # only whole block tensors overflow: the compiler places each block as its own tile
            # and spills blocks (spill.split_pieces gives each block its own lifetime)
            if self.accesses is None:
                raise CopySpillRerun()
            spill = self.block_spill = True
        if self.spec.liveness != "program_order" and trace is not None and not spill \
                and self.intervals and self.peak_program() > self.capacity:
            self._check_reordered(trace, peer)
            return
        events = range_events((iv[0], iv[1], iv[2], sid) for sid, iv in self.intervals.items())
        used = self.manual_end
        live = set()
        worst = None
        for pos, kind, nbytes, sid in events:
            if kind:
                used += nbytes
                live.add(sid)
                if used > self.peak:
                    self.peak = used
                    if used > self.capacity:
                        worst = (sid, used, set(live))
                if used > self.capacity and not spill:
                    self._overflow(sid, used, live)
            else:
                used -= nbytes
                live.discard(sid)
        if worst is not None:
            self.spill_excess = worst[1] - self.capacity
            if self.copy_spill:
                warnings.warn(SbufSpillWarning(
                    f"{self.memory.upper()}: the kernel's own tiles fit, the partition-broadcast "
                    f"copies the compiler inserts overflow it by {self.spill_excess} B per "
                    f"partition at the peak -- the compiler spills; trnsim adds the spill stores "
                    f"and reloads (fewest possible) to the trace"), stacklevel=2)
                return
            if self.block_spill:
                warnings.warn(SbufSpillWarning(
                    f"{self.memory.upper()}: the kernel's tiles fit with each block of its block "
                    f"tensors as its own tile, the whole block tensors overflow it by "
                    f"{self.spill_excess} B per partition at the peak -- the compiler spills "
                    f"blocks; trnsim adds the spill stores and reloads to the trace"),
                    stacklevel=2)
                return
            try:
                self._overflow(*worst)
            except CapacityError as e:
                warnings.warn(SbufSpillWarning(
                    f"{e} -- the NKI compiler spills the excess "
                    f"({self.spill_excess} B per partition at the peak) to HBM; trnsim adds "
                    f"the spill stores and reloads (fewest possible) to the trace"), stacklevel=2)

    def _copies_overflow(self) -> bool:
        """Whether this memory overflows in program order only because of the copies the compiler
        inserts: without them the kernel's own tiles fit."""
        if not self.copies or self.peak_program() <= self.capacity:
            return False
        own = ((iv[0], iv[1], iv[2], sid) for sid, iv in self.intervals.items()
               if sid not in self.copies)
        return sweep_peak(own, self.manual_end)[0] <= self.capacity

    def _blocks_overflow(self) -> bool:
        """Whether this memory overflows in program order only because block tensors count whole:
        with each block tensor counted as one block over its live range (the least the compiler's
        per-block tiles need, every other block spilled) and the inserted copies left out, the
        kernel's tiles fit."""
        if not self.blocks or self.peak_program() <= self.capacity:
            return False
        own = ((iv[0], iv[1], self.blocks.get(sid, iv[2]), sid)
               for sid, iv in self.intervals.items() if sid not in self.copies)
        return sweep_peak(own, self.manual_end)[0] <= self.capacity

    def _check_reordered(self, trace, peer: Optional["Accountant"]) -> None:
        """The check under the ``liveness`` rule's order: raise, or accept with its live ranges."""
        ranges = self._reordered(trace, peer)
        rule = self.spec.liveness
        note = f" (liveness rule {rule}: each tile's last use hoisted as far as its dependencies allow)"
        peak, at = sweep_peak(ranges[self.memory], self.manual_end)
        if peak > self.capacity:
            self._overflow(*at, note=note)
        if peer is not None and peer.accesses is None:  # the peer memory fails rather than spills
            # one order must fit both memories: the hoisted evacuations' results start earlier
            p2, at2 = sweep_peak(ranges[peer.memory], peer.manual_end)
            if p2 > peer.capacity:
                raise CapacityError(
                    f"{self.memory.upper()} overflows in program order, and the order that fits it"
                    f"{note} overflows {peer.memory.upper()} ({p2} B per partition, limit "
                    f"{peer.capacity} B)", rule=f"{self.memory}-capacity",
                    limit=f"{self.capacity} B per partition",
                    value=f"{self.peak_program()} B per partition in program order",
                    hint="end PSUM tiles' use earlier (evacuate each accumulator after its last "
                         "matmul)")
        for first, last, _, sid in ranges[self.memory]:
            iv = self.intervals[sid]
            iv[0], iv[1] = first, last
        self.peak = max(self.peak, peak)
        self.liveness_used = rule
        trace.meta[f"{self.memory}_liveness"] = rule

    def _reordered(self, trace, peer: Optional["Accountant"]) -> Dict[str, list]:
        """Memory -> (first, last, bytes, id) ranges of this memory's and ``peer``'s tiles under
        the ``liveness`` rule's order (liveness.hoisted_ranges)."""
        ins_list = trace.instructions
        if ins_list.blocks:  # synthesized iterations hold tiles this accountant never saw
            from .fastforward import Rerun
            raise Rerun()
        mems = [self] + ([peer] if peer is not None else [])
        tracked = {(a.memory, sid): iv[0] for a in mems for sid, iv in a.intervals.items()}
        lo = min(tracked.values())
        movable = {iv[1] for iv in self.intervals.values()}
        got = hoisted_ranges(ins_list.iter_range(lo, len(ins_list)), lo, movable, tracked)
        return {a.memory: [(*got.get((a.memory, sid), (iv[0], iv[0])), iv[2], sid)
                           for sid, iv in a.intervals.items()] for a in mems}

    def overflowing(self, trace, peer: Optional["Accountant"], among: set) -> set:
        """The tiles of ``among`` live where this memory overflows in program order; empty when
        the kernel fits, in program order or in the order its ``liveness`` rule allows."""
        ranges = [(iv[0], iv[1], iv[2], sid) for sid, iv in self.intervals.items()]
        if sweep_peak(ranges, self.manual_end)[0] <= self.capacity:
            return set()
        if self.spec.liveness != "program_order" and \
                sweep_peak(self._reordered(trace, peer)[self.memory],
                           self.manual_end)[0] <= self.capacity:
            return set()
        out: set = set()
        used, live = self.manual_end, set()
        for _, alloc, nbytes, sid in range_events(ranges):
            if alloc:
                used += nbytes
                if sid in among:
                    live.add(sid)
                if used > self.capacity:
                    out |= live
            else:
                used -= nbytes
                live.discard(sid)
        return out

    def place(self, trace) -> None:
        """Physical byte offsets of the automatically placed tiles under the memory's ``placement``
        policy (placement.py), added to ``trace.meta[memory + "_placement"]`` for the timing model
        as flat (tile id, physical buffer id, offset) triples; spilled instances keep private tiles."""
        policy = self.spec.placement
        if policy == "private" or not self.intervals or self.spill_excess:
            return
        got = self.placed   # needs_spill_plan placed the same ranges looking for fragmentation
        if policy == "site_buffers":
            if trace.instructions.blocks:  # synthesized tiles carry no allocation site
                from .fastforward import Rerun
                raise Rerun()
            from .placement import place_by_site
            got = place_by_site(self.intervals, self.spec.loop_buffers, self.manual_end)
        elif got is None:
            from .placement import place_lru, synthesized_ranges
            ranges = [(iv[0], iv[1], iv[2], sid) for sid, iv in self.intervals.items()]
            if trace.instructions.blocks:  # fast-forwarded iterations: as a full run has them
                ranges += [(*iv, sid) for sid, iv in
                           synthesized_ranges(trace.instructions, self.intervals).items()]
            got = place_lru(ranges, self.capacity, self.manual_end)
        # one physical buffer per kernel instance (as each instance's manual placements get one)
        phys = new_region_id()
        flat = trace.meta.setdefault(f"{self.memory}_placement", [])
        for sid, base in got.items():
            flat += (sid, phys, base)
        trace.meta[f"{self.memory}_placement_policy"] = policy

    def peak_program(self) -> int:
        """Peak bytes per partition with program-order live ranges."""
        return sweep_peak(((iv[0], iv[1], iv[2], sid) for sid, iv in self.intervals.items()),
                          self.manual_end)[0]

    def _overflow(self, sid: int, used: int, live: set, note: str = "") -> None:
        first, last, nbytes, name, loc = self.intervals[sid]
        big = sorted((self.intervals[i] for i in live), key=lambda x: -x[2])[:6]
        listing = "; ".join(
            f"{n} {b} B (line {lc.line})" if lc else f"{n} {b} B" for _, _, b, n, lc in big)
        manual = f"; manual placements reserve {self.manual_end} B" if self.manual_end else ""
        raise CapacityError(
            f"{self.memory.upper()} overflow: allocating '{name}' ({nbytes} B per partition) while "
            f"these are live: {listing}{manual}{note}", rule=f"{self.memory}-capacity",
            limit=f"{self.capacity} B per partition", value=f"{used} B per partition",
            where=describe(loc) if loc else None,
            hint="shrink or reuse tiles, end a tile's use earlier, or use a narrower dtype")


class ManualMemory:
    """The single physical SBUF or PSUM buffer of a core, used by manually placed tensors."""

    def __init__(self, memory: str, spec: OnChipMemory, fill: str):
        self.memory = memory
        self.spec = spec
        n = spec.partitions * spec.bytes_per_partition
        self.data = np.empty(n, dtype=np.uint8)
        self.data[:] = 0xFF if fill == "nan" else 0  # 0xFFFF.. is a NaN in every float format
        self.init = np.zeros(n, dtype=np.uint8)
        self.owner = np.zeros(n, dtype=np.int32)  # allocation+block that last wrote each byte
        self.region_id = new_region_id()
        self.owners: Dict[Any, int] = {}
        self.owner_names: Dict[int, str] = {}
        self.wrote: set = set()  # owner ids (tensor or block) that have written since allocation

    def owner_id(self, key, name: str) -> int:
        """The small integer that marks bytes written by owner ``key``."""
        i = self.owners.get(key)
        if i is None:
            i = len(self.owners) + 1
            self.owners[key] = i
            self.owner_names[i] = name
        return i


_region_ids = itertools.count(10 ** 9)


def new_region_id() -> int:
    """A fresh id for a physical buffer (manual memory, a placement map); above storage ids."""
    return next(_region_ids)
