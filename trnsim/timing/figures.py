"""RunFigures: the timing figures of a whole run (latency, engine busy shares, HFU, traffic, SBUF
peak and spills) as a record that the profile and the command line read by attribute."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence

import numpy as np

from ..ir.engines import ENGINE_ORDER, LABEL as ENGINE_LABEL
from .costs import tensor_peak_flops_per_ns

# the figures written out, in the order of the JSON summary (``latency_ns`` and ``dma_queues`` are
# for the reader of the record, not part of the printed summary)
SUMMARY_FIELDS = ("kernel", "target", "latency_us", "instructions", "instructions_by_engine",
                  "engines", "hfu", "pe_flops", "hbm_bytes", "hbm_gbps", "dma_bytes",
                  "pe_throttled_us", "sbuf_peak_bytes_per_partition",
                  "sbuf_spill_bytes_per_partition", "sbuf_spill_dmas", "sbuf_spill_traffic_bytes",
                  "sbuf_spill_cause", "sim_seconds")


@dataclass(frozen=True)
class RunFigures:
    """What timing says about a run, over every core: rounded as printed, shares of the latency."""
    kernel: str
    target: str
    latency_ns: float                       # unrounded, what shares are taken of
    latency_us: float
    instructions: int
    instructions_by_engine: Dict[str, int]
    engines: Dict[str, float]               # busy share per engine label, DMA queues and unions
    dma_queues: int                         # DMA queues of one core
    hfu: float
    pe_flops: int
    hbm_bytes: int
    hbm_gbps: float
    dma_bytes: int
    pe_throttled_us: float
    sbuf_peak_bytes_per_partition: int = 0
    sbuf_spill_bytes_per_partition: int = 0
    # the spill DMAs the compiler model inserted (nki/core/spill.py), over every core, and why:
    # "overflow" (live bytes over capacity), "loop_buffers" (held copies), "fragmentation" (no
    # contiguous run under reuse_lru); "" when nothing spilled
    sbuf_spill_dmas: int = 0
    sbuf_spill_traffic_bytes: int = 0
    sbuf_spill_cause: str = ""
    sim_seconds: float = 0.0

    def to_dict(self) -> dict:
        """JSON-ready, in the summary's key order (copies of the nested tables)."""
        out = {}
        for k in SUMMARY_FIELDS:
            v = getattr(self, k)
            out[k] = dict(v) if isinstance(v, dict) else v
        return out


def _engine_shares(cores, lat: float) -> Dict[str, float]:
    """Busy share per engine label and DMA queue, averaged over the cores."""
    per_core = []
    for c in cores:
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
        return per_core[0]
    return {k: sum(p.get(k, 0.0) for p in per_core) / len(per_core) for k in per_core[0]}


def run_figures(cores: Sequence, latency_ns: float, kernel: str, target: str,
                sim_seconds: float) -> RunFigures:
    """The figures of ``cores`` (CoreEstimates) whose slowest ends at ``latency_ns``."""
    lat = latency_ns or 1.0
    engines = _engine_shares(cores, lat)
    spec = cores[0].spec
    peak = tensor_peak_flops_per_ns(spec)  # BF16 FLOP per ns
    eq = sum(c.timeline.pe_bf16_equiv for c in cores)
    hbm = sum(c.timeline.hbm_bytes for c in cores)
    # per engine the instructions ran on (the Timeline's codes: no pass over the trace, which
    # would materialize every synthesized loop iteration)
    n_eng = np.zeros(len(ENGINE_ORDER), dtype=np.int64)
    for c in cores:
        n_eng += np.bincount(c.timeline.engine_code, minlength=len(ENGINE_ORDER))
    meta = [c.trace.meta for c in cores]
    return RunFigures(
        kernel=kernel, target=target, latency_ns=latency_ns,
        latency_us=round(latency_ns / 1e3, 3),
        instructions=sum(len(c.trace) for c in cores),
        instructions_by_engine={e: int(k) for e, k in zip(ENGINE_ORDER, n_eng.tolist()) if k},
        engines={k: round(v, 4) for k, v in engines.items()},
        dma_queues=spec.dma_engines,
        hfu=round(eq / (peak * lat * len(cores)), 4),
        pe_flops=sum(c.timeline.flops for c in cores),
        hbm_bytes=hbm, hbm_gbps=round(hbm / lat, 3),
        dma_bytes=sum(c.timeline.dma_bytes for c in cores),
        pe_throttled_us=round(sum(c.timeline.throttled_ns for c in cores) / 1e3, 3),
        sbuf_peak_bytes_per_partition=max((m.get("sbuf_peak_bytes_per_partition", 0) for m in meta),
                                          default=0),
        sbuf_spill_bytes_per_partition=max((m.get("sbuf_spill_bytes_per_partition", 0) for m in meta),
                                           default=0),
        sbuf_spill_dmas=sum(m.get("sbuf_spill_dmas", 0) for m in meta),
        sbuf_spill_traffic_bytes=sum(m.get("sbuf_spill_traffic_bytes", 0) for m in meta),
        sbuf_spill_cause=", ".join(sorted({m["sbuf_spill_cause"] for m in meta
                                           if m.get("sbuf_spill_cause")})),
        sim_seconds=round(sim_seconds, 3))
