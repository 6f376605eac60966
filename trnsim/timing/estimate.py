"""Estimate: the timing of a whole run (every core's trace) and its summary figures."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..hardware import load_catalog
from ..hardware.schema import ChipSpec, CoreSpec
from ..ir.trace import Trace
from ..ir.engines import ENGINE_ORDER, LABEL as ENGINE_LABEL
from .costs import CostModel, tensor_peak_flops_per_ns
from .scheduler import Timeline, schedule


@dataclass
class CoreEstimate:
    """The timing of one (logical) core: its trace, Timeline and core spec."""
    core: int
    trace: Trace
    timeline: Timeline
    spec: CoreSpec

    @property
    def latency_ns(self) -> float:
        """When the core's last result is ready."""
        return self.timeline.latency_ns

    def engine_busy_ns(self) -> Dict[str, float]:
        """Summed occupancy per compute engine."""
        return self.timeline.engine_busy_ns()

    def queue_busy_ns(self) -> Dict[int, float]:
        """Busy time per DMA queue."""
        return self.timeline.dma_parts.queue_busy_ns()

    def dma_active_ns(self) -> float:
        """Time during which at least one DMA queue moves data (union of intervals)."""
        return self.timeline.dma_parts.active_ns()


@dataclass
class Estimate:
    """Latency, engine busy shares, utilization and traffic of a kernel run on one NeuronCore
    (or the two logical cores of an LNC=2 launch)."""
    target: str
    cores: List[CoreEstimate]
    sim_seconds: float = 0.0
    kernel: str = "kernel"
    chip: Optional[ChipSpec] = None   # the chip the core belongs to (HBM peak of the profile)
    # the cost rules that timed it (hardware file, engine policy and stream order included): the
    # profile explains the run with these, never with a model rebuilt from defaults
    model: Optional[CostModel] = None

    @property
    def latency_ns(self) -> float:
        """Latency of the run: the slowest core."""
        return max((c.latency_ns for c in self.cores), default=0.0)

    @property
    def latency_us(self) -> float:
        """``latency_ns`` in microseconds."""
        return self.latency_ns / 1e3

    @property
    def instructions(self) -> int:
        """Instructions over every core."""
        return sum(len(c.trace) for c in self.cores)

    def summary(self) -> dict:
        """The figures ``trnsim kernel`` prints: latency, engine busy shares, HFU, HBM traffic,
        SBUF peak and the bottleneck verdict (a JSON-ready dict)."""
        lat = self.latency_ns or 1.0
        c0 = self.cores[0]
        engines: Dict[str, float] = {}
        per_core = []
        for c in self.cores:
            busy = c.engine_busy_ns()
            qb = c.queue_busy_ns()
            nq = c.spec.dma_engines
            shares = {ENGINE_LABEL[e]: v / lat for e, v in busy.items()}
            for q in range(nq):
                shares[f"DMA:q{q}"] = qb.get(q, 0.0) / lat
            shares["DMA (any queue)"] = c.dma_active_ns() / lat
            shares["DMA (mean of queues)"] = sum(qb.values()) / (nq * lat)
            per_core.append(shares)
        if len(per_core) == 1:
            engines = per_core[0]
        else:
            for k in per_core[0]:
                engines[k] = sum(p.get(k, 0.0) for p in per_core) / len(per_core)
        spec = c0.spec
        peak = tensor_peak_flops_per_ns(spec)  # BF16 FLOP per ns
        eq = sum(c.timeline.pe_bf16_equiv for c in self.cores)
        flops = sum(c.timeline.flops for c in self.cores)
        hfu = eq / (peak * lat * len(self.cores))
        hbm = sum(c.timeline.hbm_bytes for c in self.cores)
        # per engine the instructions ran on (the Timeline's codes: no pass over the trace, which
        # would materialize every synthesized loop iteration)
        n_eng = np.zeros(len(ENGINE_ORDER), dtype=np.int64)
        for c in self.cores:
            n_eng += np.bincount(c.timeline.engine_code, minlength=len(ENGINE_ORDER))
        counts: Dict[str, int] = {e: int(k) for e, k in zip(ENGINE_ORDER, n_eng.tolist()) if k}
        return {
            "kernel": self.kernel,
            "target": self.target,
            "latency_us": round(self.latency_us, 3),
            "instructions": self.instructions,
            "instructions_by_engine": counts,
            "engines": {k: round(v, 4) for k, v in engines.items()},
            "hfu": round(hfu, 4),
            "pe_flops": flops,
            "hbm_bytes": hbm,
            "hbm_gbps": round(hbm / lat, 3),
            "dma_bytes": sum(c.timeline.dma_bytes for c in self.cores),
            "pe_throttled_us": round(sum(c.timeline.throttled_ns for c in self.cores) / 1e3, 3),
            "sbuf_peak_bytes_per_partition": max(
                (c.trace.meta.get("sbuf_peak_bytes_per_partition", 0) for c in self.cores), default=0),
            "sbuf_spill_bytes_per_partition": max(
                (c.trace.meta.get("sbuf_spill_bytes_per_partition", 0) for c in self.cores), default=0),
            # the spill DMAs the compiler model inserted (nki/core/spill.py), over every core, and
            # why: "overflow" (live bytes over capacity), "loop_buffers" (held copies),
            # "fragmentation" (no contiguous run under reuse_lru); "" when nothing spilled
            "sbuf_spill_dmas": sum(c.trace.meta.get("sbuf_spill_dmas", 0) for c in self.cores),
            "sbuf_spill_traffic_bytes": sum(c.trace.meta.get("sbuf_spill_traffic_bytes", 0)
                                            for c in self.cores),
            "sbuf_spill_cause": ", ".join(sorted({c.trace.meta["sbuf_spill_cause"] for c in self.cores
                                                  if c.trace.meta.get("sbuf_spill_cause")})),
            "bottleneck": self.verdict(engines),
            "sim_seconds": round(self.sim_seconds, 3),
        }

    def verdict(self, shares: Optional[Dict[str, float]] = None,
                waits: Optional[Dict[str, Dict[str, float]]] = None) -> str:
        """One line naming the bound engine and what the others do meanwhile: the Tensor engine's
        idle share when the kernel has matmuls; otherwise what the bound engine (or, DMA-bound,
        the busiest compute engine) waits on. ``waits``: per engine label, its idle ns per engine
        or DMA queue it waited on (the profile's stall attribution); without it, the busiest
        other engine is named."""
        if shares is None:
            shares = self.summary()["engines"]
        dma_any = shares.get("DMA (any queue)", 0.0)
        cand = {k: v for k, v in shares.items() if not k.startswith("DMA")}
        cand["DMA"] = dma_any
        bound, share = max(cand.items(), key=lambda kv: kv[1])
        pe = shares.get("Tensor", 0.0)
        mean_q = shares.get("DMA (mean of queues)", 0.0)
        nq = self.cores[0].spec.dma_engines
        if share < 0.5:
            return (f"latency-bound: no engine is busy more than {share:.0%} "
                    f"(dependencies and fixed costs dominate)")
        if bound == "DMA":
            head = (f"DMA-bound: the {nq} queues are busy {mean_q:.0%} (some queue active "
                    f"{dma_any:.0%})")
        elif bound == "Tensor":
            return (f"Tensor-bound: the PE array is busy {pe:.0%}; DMA is active {dma_any:.0%}")
        else:
            head = f"{bound}-bound: the {bound} engine is busy {share:.0%}"
        if pe > 0:
            return f"{head} while the Tensor engine waits {1 - pe:.0%}"
        computes = {k: v for k, v in cand.items() if k not in ("DMA", "Tensor")}
        who, busy = bound, share
        if bound == "DMA":
            who, busy = max(computes.items(), key=lambda kv: kv[1]) if computes else ("", 0.0)
            if busy <= 0:
                return f"{head}; no compute engine work (data movement only)"
        named = {k: v for k, v in ((waits or {}).get(who) or {}).items()
                 if k != "after its last instruction"}
        lat = self.latency_ns or 1.0
        if named:
            k, v = max(named.items(), key=lambda kv: kv[1])
            subject = "its idle time is spent mostly" if who == bound else \
                f"{who} (busy {busy:.0%}) spends its idle time mostly"
            return f"{head}; no matmul: {subject} waiting on {k} ({v / lat:.0%} of the run)"
        others = {k: v for k, v in cand.items() if k not in (bound, "Tensor")}
        k, v = max(others.items(), key=lambda kv: kv[1])
        return f"{head}; no matmul (Tensor engine unused); next busiest: {k} {v:.0%}"


def _core_and_chip(target: str, hardware_file: Optional[str]):
    cat = load_catalog(hardware_file)
    chip = cat.chip_for(target)
    return cat.cores[chip.core], chip


def estimate(traces: Sequence[Trace], target: str, hardware_file: Optional[str] = None,
             kernel: str = "kernel", sim_seconds: float = 0.0,
             engine_policy: Optional[str] = None, stream_order: Optional[str] = None) -> Estimate:
    """Time ``traces`` (one per logical core) on ``target``; the trace may come from any
    generation: re-timing it for another target is the point of the trace seam.
    ``engine_policy`` / ``stream_order`` override the hardware data's engine assignment
    (timing/assign.py) and stream reordering (timing/reorder.py)."""
    core, chip = _core_and_chip(target, hardware_file)
    model = CostModel(core, chip, lnc=len(traces), hardware_file=hardware_file,
                      engine_policy=engine_policy, stream_order=stream_order)
    cores = [CoreEstimate(i, tr, schedule(tr, model), core) for i, tr in enumerate(traces)]
    return Estimate(target=target, cores=cores, sim_seconds=sim_seconds, kernel=kernel, chip=chip,
                    model=model)


def estimate_run(run, target: Optional[str] = None, hardware_file: Optional[str] = None,
                 sim_seconds: float = 0.0) -> Estimate:
    """Estimate a harness RunResult (``Kernel.run``) on its own target or another one."""
    opts = run.options
    kname = run.traces[0].meta.get("kernel", "kernel") if run.traces else "kernel"
    return estimate(run.traces, target or opts.target, hardware_file or opts.hardware_file,
                    kernel=kname, sim_seconds=sim_seconds,
                    engine_policy=getattr(opts, "engine_policy", None),
                    stream_order=getattr(opts, "stream_order", None))
