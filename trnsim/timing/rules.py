"""The scheduler's hardware rules as small objects on the des/ servers.

- in-order compute engines: one FIFO ``des.Resource`` each (an engine runs its stream in order);
- ``SharedPorts``: on NeuronCore-v2 Vector and GpSimd share the SBUF port and Vector and Scalar
  the PSUM port [ARCH2], so an instruction holds its engine and the ports it touches at once
  (``des.acquire_all``);
- ``TensorEngine``: the PE array's stationary-load tracking and the trn2/trn3 warm-up throttle
  (``TensorThrottle``) [XGL];
- ``DmaQueues``: the 16 DMA queues, taken round-robin, each a gap-filling ``des.GapResource``
  (a DMA engine serves its queues round-robin, so a transfer not ready yet does not hold back a
  later ready one) [DMAOV].
``scheduler.schedule_py`` walks the trace once in program order through these rules; the C
extension (``_native.c``) implements the same rules and is held to them by the tests.
"""
from __future__ import annotations

from collections import deque
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..des import GapResource, Resource
from ..ir.trace import Instruction
from .costs import ComputeCost, CostModel
from .timeline import DmaParts

# DMA-queue intervals searched for an idle gap: older gaps are long past or too small, and the
# bound keeps placement O(1) per transfer.  Not a hardware figure (a search bound of the model; the
# C extension takes it as an argument), so it lives here rather than in the hardware data.
GAP_WINDOW = 32

# NeuronCore-v2 shared ports [ARCH2]: which engines contend for each (the core's data file says
# whether the port is shared: ``timing.ports``)
SBUF_PORT_ENGINES = ("vector", "gpsimd")
PSUM_PORT_ENGINES = ("vector", "scalar")


class TensorThrottle:
    """dI/dt cap of the Tensor engine (Trn2/Trn3): speed ``start`` after it begins work, ramping to
    full over ``ramp_ns``, re-engaging when utilization in a ``window_ns`` window falls below
    ``min_util``."""

    def __init__(self, start: float, ramp_ns: float, window_ns: float, min_util: float):
        self.cap0 = start
        self.ramp = ramp_ns
        self.window = window_ns
        self.min_util = min_util
        self.enabled = start < 1.0
        self.ramp_start: Optional[float] = None
        self.busy: deque = deque()
        self.busy_sum = 0.0

    def factor(self, t: float) -> float:
        """Speed factor (0 < f <= 1) for an instruction starting at ``t``."""
        if not self.enabled:
            return 1.0
        lo = t - self.window
        while self.busy and self.busy[0][1] <= lo:
            s, e = self.busy.popleft()
            self.busy_sum -= e - s
        busy = self.busy_sum
        if self.busy and self.busy[0][0] < lo:
            busy -= lo - self.busy[0][0]
        if self.ramp_start is None or busy < self.min_util * self.window and \
                t - self.ramp_start >= self.window:
            self.ramp_start = t
        f = self.cap0 + (1.0 - self.cap0) * min(1.0, (t - self.ramp_start) / self.ramp)
        return f

    def record(self, s: float, e: float) -> None:
        """Note the engine busy over ``[s, e)`` (the utilization window)."""
        if self.enabled:
            self.busy.append((s, e))
            self.busy_sum += e - s


class TensorEngine:
    """The PE array: in order, a stationary load when the stationary tile changes, throttled."""

    def __init__(self, model: CostModel):
        th = model.t.tensor
        self.model = model
        self.resource = Resource("tensor")
        self.throttle = TensorThrottle(th.throttle_start, th.throttle_ramp_ns,
                                       th.throttle_window_ns, th.throttle_min_utilization)
        self.last_stationary: Optional[tuple] = None
        self.flops = 0.0
        self.bf16eq = 0.0
        self.throttled_ns = 0.0

    def issue(self, ins: Instruction, ready: float) -> Tuple[float, float, ComputeCost]:
        """(start, occupancy, cost) of matmul ``ins`` whose inputs are ready at ``ready``."""
        stat = ins.reads[0] if ins.reads else None
        key = (stat.tensor, stat.partition, stat.start, stat.stop) if stat is not None else None
        cost = self.model.matmul(ins, key != self.last_stationary)
        self.last_stationary = key
        s = self.resource.earliest(ready)
        f = self.throttle.factor(s)
        occ = cost.occupancy_ns / f
        if f < 1.0:
            self.throttled_ns += occ - cost.occupancy_ns
        self.throttle.record(s, s + occ)
        self.resource.hold(s, occ)
        self.flops += cost.flops
        self.bf16eq += cost.pe_bf16_equiv
        return s, occ, cost


class SharedPorts:
    """The v2 SBUF / PSUM ports as FIFO resources, held together with the engine."""

    def __init__(self, share_sbuf: bool, share_psum: bool):
        self.share_sbuf = share_sbuf
        self.share_psum = share_psum
        self.active = share_sbuf or share_psum
        self.sbuf = Resource("sbuf-port")
        self.psum = Resource("psum-port")

    def needed(self, engine: str, ins: Instruction) -> Tuple[Resource, ...]:
        """The ports ``ins`` on ``engine`` contends for (none on cores without shared ports)."""
        if not self.active:
            return ()
        regs = ins.reads + ins.writes
        out = []
        if self.share_sbuf and engine in SBUF_PORT_ENGINES and \
                any(r.memory == "sbuf" for r in regs):
            out.append(self.sbuf)
        if self.share_psum and engine in PSUM_PORT_ENGINES and \
                any(r.memory == "psum" for r in regs):
            out.append(self.psum)
        return tuple(out)


class DmaQueues:
    """``nq`` DMA queues taken round-robin ``k`` at a time, each a gap-filling server; records the
    placements grouped as ``DmaParts`` stores them.

    Queues with identical histories share one GapResource (copy-on-write), so a transfer over all
    16 queues is placed once, not 16 times."""

    def __init__(self, nq: int, window: int = GAP_WINDOW):
        self.nq = nq
        first = GapResource(window)
        self.hist: List[GapResource] = [first] * nq
        self.members: Dict[int, set] = {id(first): set(range(nq))}
        self.next = 0
        # per group (ins, start, end) + its queues, as DmaParts stores them
        self.g_ins: List[int] = []
        self.g_start: List[float] = []
        self.g_end: List[float] = []
        self.g_off: List[int] = [0]
        self.g_queue: List[int] = []
        self.busy = [0.0] * nq
        self.order: Dict[int, None] = {}

    def place(self, i: int, ready: float, dur: float, k: int) -> Tuple[float, float]:
        """Place transfer ``i`` (``dur`` on each of the next ``k`` queues, ready at ``ready``);
        returns (first start, last end)."""
        nq, hist, members = self.nq, self.hist, self.members
        g_ins, g_start, g_end, g_off, g_queue = (self.g_ins, self.g_start, self.g_end, self.g_off,
                                                  self.g_queue)
        busy, order = self.busy, self.order
        new_queues = len(order) < nq  # first-use order is complete once every queue was used
        qnext = self.next
        fin = ready
        first = None
        groups: Dict[int, List[int]] = {}
        add = groups.setdefault
        for j in range(k):
            q = (qnext + j) % nq
            add(id(hist[q]), []).append(q)
        for hid, qs in groups.items():
            h = hist[qs[0]]
            mem = members[hid]
            if len(qs) != len(mem):  # only some queues of this history take part: split
                h = h.copy()
                for q in qs:
                    hist[q] = h
                    mem.discard(q)
                members[id(h)] = set(qs)
            s = h.place(ready, dur)
            e = s + dur
            if first is not None and g_ins[-1] == i and g_start[-1] == s and g_end[-1] == e:
                g_off.pop()  # placed like the previous group: store as its continuation
            else:
                g_ins.append(i)
                g_start.append(s)
                g_end.append(e)
            g_queue.extend(qs)
            g_off.append(len(g_queue))
            for q in qs:
                busy[q] += e - s
            if new_queues:
                for q in qs:
                    order.setdefault(q)
            if first is None or s < first:
                first = s
            if e > fin:
                fin = e
        self.next = (qnext + k) % nq
        return (first if first is not None else ready), fin

    def parts(self) -> DmaParts:
        """The placements as DmaParts (queue ids as uint8 up to 256 queues)."""
        q = np.array(self.g_queue, dtype=np.uint8 if self.nq <= 256 else np.uint16)
        return DmaParts(self.g_ins, self.g_start, self.g_end, self.g_off, q, self.busy, self.order)
