"""Estimate: the timing of a whole run (every core's trace) and its figures (timing/figures.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..hardware import load_catalog
from ..hardware.schema import ChipSpec, CoreSpec
from ..ir.trace import Trace
from .costs import CostModel
from .figures import RunFigures, run_figures
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

    def __post_init__(self):
        # an Estimate built by hand (not by ``estimate``) gets the catalog's chip and default
        # rules here, once, so every reader finds ``chip`` and ``model`` set
        if self.chip is None and self.cores:
            self.chip = load_catalog().chip_for(self.target)
        if self.model is None and self.cores:
            self.model = CostModel(self.cores[0].spec, self.chip, lnc=len(self.cores))

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

    def figures(self) -> RunFigures:
        """The run's timing figures (latency, engine busy shares, HFU, HBM traffic, SBUF peak and
        spills) as a record; the bottleneck verdict that explains them is the profile's
        (``trnsim.profile.summary.summarize``)."""
        return run_figures(self.cores, self.latency_ns, self.kernel, self.target, self.sim_seconds)


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
