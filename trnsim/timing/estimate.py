"""Estimate: the timing of a whole run (every core's trace) and its summary figures."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..hardware import load_catalog
from ..hardware.schema import CoreSpec
from ..ir.trace import Trace
from ..ir.engines import LABEL as ENGINE_LABEL
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
        counts: Dict[str, int] = {}
        for c in self.cores:
            for ins in c.trace:
                counts[ins.engine] = counts.get(ins.engine, 0) + 1
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
            "bottleneck": self.verdict(engines),
            "sim_seconds": round(self.sim_seconds, 3),
        }

    def verdict(self, shares: Optional[Dict[str, float]] = None) -> str:
        """One line naming the bound engine and what the Tensor engine does meanwhile."""
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
            return (f"DMA-bound: the {nq} queues are busy {mean_q:.0%} (some queue active "
                    f"{dma_any:.0%}) while the Tensor engine waits {1 - pe:.0%}")
        if bound == "Tensor":
            return (f"Tensor-bound: the PE array is busy {pe:.0%}; DMA is active {dma_any:.0%}")
        return (f"{bound}-bound: the {bound} engine is busy {share:.0%} while the Tensor engine "
                f"waits {1 - pe:.0%}")


def _core_and_chip(target: str, hardware_file: Optional[str]):
    cat = load_catalog(hardware_file)
    chip = cat.chip_for(target)
    return cat.cores[chip.core], chip


def estimate(traces: Sequence[Trace], target: str, hardware_file: Optional[str] = None,
             kernel: str = "kernel", sim_seconds: float = 0.0) -> Estimate:
    """Time ``traces`` (one per logical core) on ``target``; the trace may come from any
    generation: re-timing it for another target is the point of the trace seam."""
    core, chip = _core_and_chip(target, hardware_file)
    model = CostModel(core, chip, lnc=len(traces), hardware_file=hardware_file)
    cores = [CoreEstimate(i, tr, schedule(tr, model), core) for i, tr in enumerate(traces)]
    return Estimate(target=target, cores=cores, sim_seconds=sim_seconds, kernel=kernel)


def estimate_run(run, target: Optional[str] = None, hardware_file: Optional[str] = None,
                 sim_seconds: float = 0.0) -> Estimate:
    """Estimate a harness RunResult (``Kernel.run``) on its own target or another one."""
    opts = run.options
    kname = run.traces[0].meta.get("kernel", "kernel") if run.traces else "kernel"
    return estimate(run.traces, target or opts.target, hardware_file or opts.hardware_file,
                    kernel=kname, sim_seconds=sim_seconds)
