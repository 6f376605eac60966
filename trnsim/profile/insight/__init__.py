"""The profile explains: hotspots, stall reasons, critical path, DMA detail, speed of light and
memory over time for one run, as a JSON-ready dict (``analyze``) that the terminal summary,
``--json``, the HTML report and the Perfetto trace all read."""
from __future__ import annotations

from typing import Optional

from ...timing.estimate import Estimate
from ...timing.figures import RunFigures
from ..verdict import bottleneck, with_roofline
from . import dma, hotspots, occupancy, roofline, stalls
from .table import build

# the critical path in the dict keeps its last steps only: on a 400k-instruction kernel the whole
# path can be most of the trace (the full length is in ``critical_path_length``)
PATH_LIMIT = 5000
# occupancy series are binned to this many points (each bin keeps its maximum)
OCCUPANCY_POINTS = 4000


def analyze(est: Estimate, top: int = 20, path_limit: int = PATH_LIMIT,
            occupancy_points: int = OCCUPANCY_POINTS, figures: Optional[RunFigures] = None) -> dict:
    """JSON-ready explanation of a run (the slowest core; 'core' says which). ``figures``: the
    run's ``est.figures()`` when the caller has them (saves a pass over the timelines)."""
    core = max(est.cores, key=lambda c: c.latency_ns)
    tl, trace, spec = core.timeline, core.trace, core.spec
    chip = est.chip
    tab = build(trace)
    b = stalls.binding(tl, spec.timing.sync.cross_engine_ns)
    st = stalls.stalls(tab, tl, b, top)
    path, path_len = stalls.critical_path(tab, tl, b, path_limit)
    model = est.model   # the run's own rules (hardware file, engine policy, stream order)
    sol = roofline.speed_of_light(tl, spec, chip)
    out = {
        "core": core.core,
        "latency_ns": core.latency_ns,
        "instructions": len(trace),
        "hotspots": {"by_line": hotspots.by_line(tab, tl, top),
                     "by_opcode": hotspots.by_opcode(tab, tl, top)},
        "stalls": st,
        "critical_path": path,
        "critical_path_length": path_len,
        "dma": {"transfers": dma.transfers(tab, trace, tl, model, top),
                "fixed_gaps": dma.fixed_gaps(trace, tl, top),
                "summary": dma.summary(trace, tl, model)},
        "speed_of_light": sol,
        "occupancy": {m: occupancy.series(trace, tl, m, getattr(spec, m).bytes_per_partition,
                                          occupancy_points) for m in ("sbuf", "psum")},
    }
    out["verdict"] = verdict(figures if figures is not None else est.figures(), st, sol)
    return out


def verdict(fig: RunFigures, st: dict, sol: Optional[dict] = None) -> str:
    """The summary's bottleneck line, told what the busiest compute engine waits on (the stall
    attribution), with the roofline point when the kernel does PE work."""
    return with_roofline(bottleneck(fig, {k: v["waiting_on"] for k, v in st.items()}), sol)
