"""The compiler's reordering within an engine's stream (the ``window`` stream order, issue 13).

Each engine runs its instruction stream in order [ARCH2], but the order is the Neuron compiler's:
its list scheduler issues independent work (e.g. iterations of an ``affine_range`` loop) while an
instruction waits on its inputs, hiding the ~100-cycle wait of a dependent instruction [ARCH2 PERF].
Its algorithm is not public; the model (``timing.reorder`` in cores.toml):

- when the next Vector / Scalar / GpSimd instruction ``i`` (program order) would leave its engine
  idle until its inputs are ready, the engine instead issues a later instruction of its own stream
  that can start sooner: among the next ``window - 1`` instructions of the stream (the traced
  engine's), one whose inputs are all produced (by instructions already placed, or by DMA loads
  whose own inputs are, which the compiler hoists: those loads are placed first), the one that can
  start first (ties: program order); repeated while the engine would still idle;
- a candidate whose loads would reach the DMA queues ahead of an older transfer that is ready to
  go (program order from ``i``, inputs produced) is deferred: only when no other candidate can start
  in the idle gap are the loads of the first such candidate hoisted and the candidate tried.  Loads
  hoisted for candidates that are then not issued would otherwise take the queues ahead of older
  loads the waiting chain needs (fused Mamba v1 at window 16: its first 1 MiB load landed 57 us
  late); a longest-remaining-chain or oldest-first pick changes nothing there (nearly every gap
  holds one ready candidate);
- an instruction left to the compiler (``engine_auto`` with alternatives) is not pulled ahead: its
  engine is chosen when program order reaches it (assign.py scores each engine's queue as it
  stands then, before any early issue in front of it);
- the Tensor engine stays in program order (its stationary-load reuse and dI/dt throttle follow
  it); DMA transfers take gaps (rules.DmaQueues), and where the core's data says so
  (``timing.reorder.dma_triggers``) the DMA trigger stream is ordered by readiness too: before a
  transfer goes to the queues, the later transfers among the next ``window - 1`` of the DMA stream
  whose inputs are produced sooner go first (a load ready from the start is triggered before a
  store that waits on compute; a gap too short for it would otherwise push it behind the store).

A gap-filling placement (des.GapResource) does not capture this: the idle gaps a dependent chain
leaves (~100 ns) are shorter than any instruction that could fill them (~1 us for 512 fp32
elements), so the engine must delay a waiting instruction, not fill behind it.  Dependencies still
hold: an instruction is placed only after every instruction it depends on (RAW, WAR, WAW; deps.py,
with same-engine reads never collapsed on these streams).  ``window = 1`` is program order.

``Lookahead`` below is the bookkeeping of the Python reference (scheduler.schedule_py); the C
scheduler (_native_schedule.h) implements the same rule.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence


class Lookahead:
    """Per reordered engine, its stream (indices of the instructions traced on it) and which
    instructions are already placed; finds the candidates an idle engine may issue early."""

    def __init__(self, instrs, engines: Sequence[str], window: int, deps):
        self.instrs = instrs
        self.window = window
        self.deps = deps
        self.streams: Dict[str, List[int]] = {e: [] for e in engines}
        for i, ins in enumerate(instrs):
            s = self.streams.get(ins.engine)
            if s is not None:
                s.append(i)
        self.head = dict.fromkeys(self.streams, 0)
        self.placed = bytearray(len(self.deps))

    def candidates(self, i: int, eng: str) -> List[int]:
        """The instructions of ``eng``'s stream an idle engine may issue before ``i``: the next
        ``window - 1`` positions after ``i`` (after its first unplaced one when ``i`` was moved
        there from another engine), not yet placed."""
        s = self.streams[eng]
        h = self.head[eng]
        placed = self.placed
        while h < len(s) and placed[s[h]]:
            h += 1
        self.head[eng] = h
        w = self.window - 1
        if h < len(s) and s[h] == i:
            h += 1
        return [j for j in s[h:h + w] if not placed[j]]

    def hoists(self, j: int, i: int) -> Optional[List[int]]:
        """The DMA loads to place before ``j`` may run (``[]`` when its inputs are all produced),
        or None when ``j`` waits on an instruction not placed yet that is not such a load."""
        placed, deps, instrs = self.placed, self.deps, self.instrs
        out = []
        for p in deps[j]:
            if p < i or placed[p]:
                continue
            if instrs[p].engine != "dma":
                return None
            for q in deps[p]:
                if q >= i and not placed[q]:
                    return None
            out.append(p)
        return sorted(out)

    def overtakes(self, hoist: List[int], i: int) -> bool:
        """Whether hoisting the loads ``hoist`` (sorted) now would put them on the DMA queues ahead of
        an older unplaced transfer (program order from ``i``) whose own inputs are produced."""
        placed, deps, instrs = self.placed, self.deps, self.instrs
        for d in range(i, hoist[-1]):
            if placed[d] or instrs[d].engine != "dma" or d in hoist:
                continue
            if all(q < i or placed[q] for q in deps[d]):
                return True
        return False
