"""Side by side: one kernel's figures on several targets (latency, engine shares, HFU, HBM
bandwidth, verdict) as records, for ``trnsim kernel --target trn1,trn2,trn3``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from ...timing.estimate import Estimate
from ..verdict import bottleneck


@dataclass(frozen=True)
class TargetRow:
    """One target's figures next to the others'."""
    latency_us: float
    speedup_vs_first: float
    engines: Dict[str, float]       # busy share per engine (the per-queue DMA shares left out)
    hfu: float
    hbm_gbps: float
    instructions: int
    verdict: str

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {"latency_us": self.latency_us, "speedup_vs_first": self.speedup_vs_first,
                "engines": dict(self.engines), "hfu": self.hfu, "hbm_gbps": self.hbm_gbps,
                "instructions": self.instructions, "verdict": self.verdict}


@dataclass(frozen=True)
class TargetComparison:
    """A kernel's rows per target, in the order the targets were given."""
    kernel: str
    targets: Dict[str, TargetRow]

    def to_dict(self) -> dict:
        """JSON-ready: ``{"kernel": ..., "targets": {target: row}}``."""
        return {"kernel": self.kernel, "targets": {t: r.to_dict() for t, r in self.targets.items()}}


def side_by_side(ests: Dict[str, Estimate],
                 analyses: Optional[Dict[str, dict]] = None) -> TargetComparison:
    """Per target: the figures to compare, and the speed-up of each against the first target.
    ``analyses``: per target, the profile's analysis, whose verdict (told what engines wait on)
    replaces the one read from the busy shares alone."""
    rows = {}
    base = None
    for target, est in ests.items():
        f = est.figures()
        eng = {k: v for k, v in f.engines.items() if not k.startswith("DMA:q")}
        lat = f.latency_us
        if base is None:
            base = lat
        found = (analyses or {}).get(target)
        rows[target] = TargetRow(latency_us=lat, speedup_vs_first=(base / lat) if lat else 0.0,
                                 engines=eng, hfu=f.hfu, hbm_gbps=f.hbm_gbps,
                                 instructions=f.instructions,
                                 verdict=found["verdict"] if found is not None else bottleneck(f))
    return TargetComparison(next(iter(ests.values())).kernel if ests else "", rows)
