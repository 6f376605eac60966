"""List scheduler: when each instruction of a trace runs on a NeuronCore.

Each compute engine runs its instructions in program order; an instruction starts when its engine
is free and every instruction it depends on (deps.py) has produced its result.  Under the
``window`` stream order (``timing.reorder``) the order of the Vector / Scalar / GpSimd streams is
the compiler's: an engine that would idle until its next instruction's inputs are ready issues a
later ready instruction of its stream instead, at most ``window - 1`` places ahead (reorder.py);
where ``timing.reorder.dma_triggers`` is set, the DMA trigger stream too (a later transfer whose
inputs are produced sooner goes to the queues first).
A DMA instruction spreads over ``ceil(P / 8)`` of the 16 DMA queues [DMAOV]; each queue is FIFO,
the transfer pays the fixed descriptor/semaphore latency [DMABW] (overlapped with earlier transfers
on the queue) and moves its bytes at the engines' rate times the DMA efficiency of its contiguous
chunk [FIG-DMA], capped by the core's HBM share.  On trn2/trn3 the Tensor engine is throttled to 50% after it starts and ramps
to full speed over ~3 us, re-engaging when its utilization falls below 50% in a ~3 us window [XGL].
On v2, Vector and GpSimd serialize on SBUF and Vector and Scalar on PSUM [ARCH2].

Dependencies only point backwards in program order, so one pass in program order computes the
schedule: an instruction's inputs are placed before it (one issued early is placed once its inputs
are, and skipped when program order reaches it).  A DMA engine serves its 16 queues round-robin
[DMAOV], so a transfer that is not ready yet does not hold back later ready ones: each transfer
takes the engine's earliest idle gap after it is ready (work-conserving; the HBM cap is applied per
transfer).

``schedule`` runs the C implementation (native.py) when it is built; ``schedule_py`` below is the
reference it must match exactly.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from ..des import Resource, acquire_all
from ..ir.engines import COMPUTE_ENGINES, ENGINE_CODE, ENGINE_ORDER, check as check_engine
from ..ir.trace import Trace
from .costs import CostModel
from .deps import dependencies_py
from .assign import assign, ready as _ready
from .reorder import Lookahead
from .rules import GAP_WINDOW, DmaQueues, SharedPorts, TensorEngine
from .timeline import Timeline

__all__ = ["ENGINE_ORDER", "GAP_WINDOW", "Timeline", "schedule", "schedule_py"]


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
    """The reference list scheduler (pure Python): one pass in program order through the rules
    of rules.py, issuing later instructions early where the ``window`` stream order lets an idle
    engine do so (reorder.py)."""
    n = len(trace.instructions)
    if deps is None:
        deps = dependencies_py(trace, model.reorder_engines)
    t = model.t
    start = [0.0] * n
    end = [0.0] * n
    busy_end = [0.0] * n
    engines = [""] * n
    sync_ns = t.sync.cross_engine_ns
    engine = {e: Resource(e) for e in COMPUTE_ENGINES}
    pe = TensorEngine(model)
    engine["tensor"] = pe.resource
    ports = SharedPorts(t.ports.vector_gpsimd_share_sbuf, t.ports.vector_scalar_share_psum)
    dma = DmaQueues(model.dma_engines, GAP_WINDOW)
    moved = [0, 0]  # HBM bytes, DMA bytes
    auto = model.policy != "fixed"
    instrs = trace.instructions
    look = None
    if model.reorder_window > 1 and model.reorder_engines:
        streams = model.reorder_engines + (("dma",) if model.reorder_dma else ())
        look = Lookahead(instrs, streams, model.reorder_window, deps)

    def place_dma(i, ins, ready):
        c = model.dma(ins)
        dur = c.bytes / c.rate_bytes_per_ns if c.rate_bytes_per_ns > 0 else 0.0
        start[i], fin = dma.place(i, ready + c.fixed_ns, dur, c.engines)
        end[i] = fin
        busy_end[i] = fin
        moved[0] += c.hbm_bytes
        moved[1] += c.bytes

    def place_compute(i, ins, eng, res, cost, ready):
        occ = cost.occupancy_ns
        if cost.hidden_ns and res.free_at > ready:  # bubble overlaps the previous instruction
            occ -= min(cost.hidden_ns, res.free_at - ready)
        held = ports.needed(eng, ins) if ports.active else ()
        s = acquire_all((res,) + held, ready, occ) if held else res.acquire(ready, occ)
        start[i] = s
        busy_end[i] = s + occ
        end[i] = s + occ + cost.latency_ns

    def dma_ahead(i, ready_i):
        """Before transfer ``i`` (inputs ready at ``ready_i``) goes to the queues, trigger the later
        transfers of the DMA stream (within the window) whose inputs are produced sooner: the
        compiler orders the trigger stream as it orders the compute streams."""
        placed = look.placed
        for j in look.candidates(i, "dma"):
            if any(p >= i and not placed[p] for p in deps[j]):
                continue
            r = _ready(deps[j], end, engines, "dma", sync_ns)
            if r < ready_i:
                engines[j] = "dma"
                place_dma(j, instrs[j], r)
                placed[j] = 1

    def hoist_loads(hoist):
        """Place the loads the compiler issues early for an instruction issued early."""
        for p in hoist:
            if not look.placed[p]:
                engines[p] = "dma"
                place_dma(p, instrs[p], _ready(deps[p], end, engines, "dma", sync_ns))
                look.placed[p] = 1

    def issue_early(i, eng, res, ready_i):
        """While ``eng`` would idle before ``i`` is ready, issue the candidate that starts first
        (one whose loads would overtake an older ready transfer only when none other can)."""
        placed = look.placed
        while res.free_at < ready_i:
            f = res.free_at
            best = deferred = None
            for j in look.candidates(i, eng):
                if placed[j] or model.auto_engines(instrs[j]):
                    continue
                hoist = look.hoists(j, i)
                if hoist is None:
                    continue
                if hoist and look.overtakes(hoist, i):
                    if deferred is None:
                        deferred = (j, hoist)
                    continue
                hoist_loads(hoist)
                r = _ready(deps[j], end, engines, eng, sync_ns)
                sj = r if r > f else f
                if sj < ready_i and (best is None or sj < best[0]):
                    best = (sj, j, r)
            if best is None and deferred is not None:
                j = deferred[0]
                hoist_loads(deferred[1])
                r = _ready(deps[j], end, engines, eng, sync_ns)
                if max(r, f) < ready_i:
                    best = (max(r, f), j, r)
            if best is None:
                return
            j = best[1]
            engines[j] = eng
            place_compute(j, instrs[j], eng, res, model.compute(instrs[j]), best[2])
            placed[j] = 1

    for i, ins in enumerate(instrs):  # in order: the trace may be a lazy sequence
        if look is not None and look.placed[i]:
            continue  # issued early
        eng = ins.engine
        cost = None
        if auto and eng not in ("dma", "tensor"):
            alts = model.auto_engines(ins)
            if alts:  # the compiler's choice among the capable engines (assign.py)
                eng, cost = assign(ins, alts, deps[i], end, engines, engine, ports, model)
        engines[i] = eng
        ready = _ready(deps[i], end, engines, eng, sync_ns)
        if eng == "dma":
            if look is not None and model.reorder_dma:
                dma_ahead(i, ready)
            place_dma(i, ins, ready)
        elif eng == "tensor":
            s, occ, cost = pe.issue(ins, ready)
            start[i] = s
            busy_end[i] = s + occ
            end[i] = s + occ + cost.latency_ns
        else:
            res = engine.get(eng)
            if res is None:
                check_engine(eng)  # raises: no such engine on the core
            if cost is None:
                cost = model.compute(ins)
            if look is not None and eng in look.streams and res.free_at < ready:
                issue_early(i, eng, res, ready)
            place_compute(i, ins, eng, res, cost, ready)
        if look is not None:
            look.placed[i] = 1
    codes = np.array([ENGINE_CODE[e] for e in engines], dtype=np.uint8)
    return Timeline(np.array(start, dtype=np.float64), np.array(end, dtype=np.float64),
                    np.array(busy_end, dtype=np.float64), codes, dma.parts(), pe.flops, pe.bf16eq,
                    moved[0], moved[1], pe.throttled_ns, deps)
