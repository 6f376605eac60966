"""List scheduler: when each instruction of a trace runs on a NeuronCore.

Each compute engine runs its instructions in program order; an instruction starts when its engine
is free and every instruction it depends on (deps.py) has produced its result.  A DMA instruction
spreads over ``ceil(P / 8)`` of the 16 DMA queues [DMAOV]; each queue is FIFO, the transfer pays the
fixed descriptor/semaphore latency [DMABW] (overlapped with earlier transfers on the queue) and moves
its bytes at the engines' rate times the DMA efficiency of its contiguous chunk [FIG-DMA], capped by
the core's HBM share.  On trn2/trn3 the Tensor engine is throttled to 50% after it starts and ramps
to full speed over ~3 us, re-engaging when its utilization falls below 50% in a ~3 us window [XGL].
On v2, Vector and GpSimd serialize on SBUF and Vector and Scalar on PSUM [ARCH2].

Dependencies only point backwards in program order and compute engines are in-order, so one pass in
program order computes their schedule exactly.  A DMA engine serves its 16 queues round-robin
[DMAOV], so a transfer that is not ready yet does not hold back later ready ones: each transfer
takes the engine's earliest idle gap after it is ready (work-conserving; the HBM cap is applied per
transfer).

``schedule`` runs the C implementation (native.py) when it is built; ``schedule_py`` below is the
reference it must match exactly.
"""
from __future__ import annotations

import bisect
from collections import deque
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.trace import Trace
from .costs import CostModel
from .deps import dependencies_py
from .timeline import ENGINE_CODE, ENGINE_ORDER, DmaParts, Timeline

__all__ = ["ENGINE_ORDER", "GAP_WINDOW", "Timeline", "schedule", "schedule_py"]


class _Throttle:
    """dI/dt cap of the Tensor engine (Trn2/Trn3)."""

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
        if self.enabled:
            self.busy.append((s, e))
            self.busy_sum += e - s


GAP_WINDOW = 32


class _EngineGaps:
    """Busy intervals of one DMA engine, merged; places a transfer in the earliest fitting gap."""
    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: List[float] = []
        self.ends: List[float] = []

    def place(self, ready: float, dur: float) -> float:
        st, en = self.starts, self.ends
        n = len(st)
        if n == 0 or ready >= en[-1]:
            s = ready
            if n and s == en[-1]:
                en[-1] = s + dur
            else:
                st.append(s)
                en.append(s + dur)
            return s
        # first interval ending after ready; try the gaps from there on, looking back at most
        # GAP_WINDOW intervals (older gaps are long past or too small; keeps this O(1))
        j = bisect.bisect_right(en, ready)
        if j < n - GAP_WINDOW:
            j = n - GAP_WINDOW
            ready = max(ready, en[j - 1])
        s = ready
        while j < n:
            if s + dur <= st[j]:
                break
            if en[j] > s:
                s = en[j]
            j += 1
        e = s + dur
        if j == n:
            if s == en[-1]:
                en[-1] = e
            else:
                st.append(s)
                en.append(e)
            return s
        # insert [s, e) before interval j, merging with neighbours
        if j > 0 and en[j - 1] == s:
            en[j - 1] = e
            if e == st[j]:
                en[j - 1] = en[j]
                del st[j]
                del en[j]
        elif e == st[j]:
            st[j] = s
        else:
            st.insert(j, s)
            en.insert(j, e)
        return s


def schedule(trace: Trace, model: CostModel, deps: Optional[Sequence[Tuple[int, ...]]] = None,
             backend: str = "auto") -> Timeline:
    """When each instruction of ``trace`` runs on the core ``model`` describes.

    ``deps`` (from ``dependencies``) is computed when not given.  ``backend``: 'auto' (native when
    built), 'native' or 'python'; both give the same Timeline."""
    from . import native
    if native.resolve(backend):
        return native.schedule(trace, model, deps)
    return schedule_py(trace, model, deps)


def schedule_py(trace: Trace, model: CostModel,
                deps: Optional[Sequence[Tuple[int, ...]]] = None) -> Timeline:
    """The reference list scheduler (pure Python)."""
    n = len(trace.instructions)
    if deps is None:
        deps = dependencies_py(trace)
    t = model.t
    start = [0.0] * n
    end = [0.0] * n
    busy_end = [0.0] * n
    engines = [""] * n
    free: Dict[str, float] = {e: 0.0 for e in ENGINE_ORDER}
    nq = model.dma_engines
    # engines with identical histories share one _EngineGaps (copy-on-write): a DMA over all
    # 16 engines is then placed once, not 16 times
    first_hist = _EngineGaps()
    hist = [first_hist] * nq
    members = {id(first_hist): set(range(nq))}
    qnext = 0
    # DMA placements, grouped as DmaParts stores them: per group (ins, start, end) + its queues
    g_ins: List[int] = []
    g_start: List[float] = []
    g_end: List[float] = []
    g_off: List[int] = [0]
    g_queue: List[int] = []
    qbusy = [0.0] * nq
    qorder: Dict[int, None] = {}
    sync_ns = t.sync.cross_engine_ns
    sbuf_port = 0.0  # v2: Vector/GpSimd share SBUF
    psum_port = 0.0  # v2: Vector/Scalar share PSUM
    share_sbuf = t.ports.vector_gpsimd_share_sbuf
    share_psum = t.ports.vector_scalar_share_psum
    th = t.tensor
    throttle = _Throttle(th.throttle_start, th.throttle_ramp_ns, th.throttle_window_ns,
                         th.throttle_min_utilization)
    last_stationary = None
    flops = 0.0
    bf16eq = 0.0
    hbm_bytes = 0
    dma_bytes = 0
    throttled = 0.0
    for i, ins in enumerate(trace.instructions):  # in order: the trace may be a lazy sequence
        eng = ins.engine
        engines[i] = eng
        ready = 0.0
        for p in deps[i]:
            r = end[p]
            if sync_ns and engines[p] != eng:
                r += sync_ns
            if r > ready:
                ready = r
        if eng == "dma":
            c = model.dma(ins)
            k = c.engines
            dur = c.bytes / c.rate_bytes_per_ns if c.rate_bytes_per_ns > 0 else 0.0
            s0 = ready + c.fixed_ns
            fin = s0
            first = None
            engs = [(qnext + j) % nq for j in range(k)]
            groups: Dict[int, List[int]] = {}
            for q in engs:
                groups.setdefault(id(hist[q]), []).append(q)
            for hid, qs in groups.items():
                h = hist[qs[0]]
                mem = members[hid]
                if len(qs) != len(mem):  # only some engines of this history take part: split
                    h2 = _EngineGaps()
                    h2.starts = list(h.starts)
                    h2.ends = list(h.ends)
                    for q in qs:
                        hist[q] = h2
                        mem.discard(q)
                    members[id(h2)] = set(qs)
                    h = h2
                s = h.place(s0, dur)
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
                    qbusy[q] += e - s
                    qorder.setdefault(q)
                if first is None or s < first:
                    first = s
                if e > fin:
                    fin = e
            qnext = (qnext + k) % nq
            start[i] = first if first is not None else s0
            end[i] = fin
            busy_end[i] = fin
            hbm_bytes += c.hbm_bytes
            dma_bytes += c.bytes
            continue
        if eng == "tensor":
            stat = ins.reads[0] if ins.reads else None
            key = (stat.tensor, stat.partition, stat.start, stat.stop) if stat is not None else None
            cost = model.matmul(ins, key != last_stationary)
            last_stationary = key
            s = free["tensor"] if free["tensor"] > ready else ready
            f = throttle.factor(s)
            occ = cost.occupancy_ns / f
            if f < 1.0:
                throttled += occ - cost.occupancy_ns
            throttle.record(s, s + occ)
            flops += cost.flops
            bf16eq += cost.pe_bf16_equiv
        else:
            cost = model.compute(ins)
            s = free[eng] if free[eng] > ready else ready
            occ = cost.occupancy_ns
            if share_sbuf or share_psum:
                touches_sbuf = any(r.memory == "sbuf" for r in ins.reads + ins.writes)
                touches_psum = any(r.memory == "psum" for r in ins.reads + ins.writes)
                if share_sbuf and touches_sbuf and eng in ("vector", "gpsimd") and sbuf_port > s:
                    s = sbuf_port
                if share_psum and touches_psum and eng in ("vector", "scalar") and psum_port > s:
                    s = psum_port
                if share_sbuf and touches_sbuf and eng in ("vector", "gpsimd"):
                    sbuf_port = s + occ
                if share_psum and touches_psum and eng in ("vector", "scalar"):
                    psum_port = s + occ
        start[i] = s
        busy_end[i] = s + occ
        end[i] = s + occ + cost.latency_ns
        free[eng] = s + occ
    parts = DmaParts(g_ins, g_start, g_end, g_off,
                     np.array(g_queue, dtype=np.uint8 if nq <= 256 else np.uint16), qbusy, qorder)
    codes = np.array([ENGINE_CODE[e] for e in engines], dtype=np.uint8)
    return Timeline(np.array(start, dtype=np.float64), np.array(end, dtype=np.float64),
                    np.array(busy_end, dtype=np.float64), codes, parts, flops, bf16eq, hbm_bytes,
                    dma_bytes, throttled, deps)
