"""Side by side: one kernel's figures on several targets (latency, engine shares, HFU, HBM
bandwidth, verdict), JSON-ready, for ``trnsim kernel --target trn1,trn2,trn3``."""
from __future__ import annotations

from typing import Dict

from ...timing.estimate import Estimate
from ..verdict import bottleneck


def side_by_side(ests: Dict[str, Estimate]) -> dict:
    """Per target: the figures to compare, and the speed-up of each against the first target."""
    rows = {}
    base = None
    for target, est in ests.items():
        f = est.figures()
        eng = {k: v for k, v in f.engines.items() if not k.startswith("DMA:q")}
        lat = f.latency_us
        if base is None:
            base = lat
        rows[target] = {"latency_us": lat, "speedup_vs_first": (base / lat) if lat else 0.0,
                        "engines": eng, "hfu": f.hfu, "hbm_gbps": f.hbm_gbps,
                        "instructions": f.instructions, "verdict": bottleneck(f)}
    return {"kernel": next(iter(ests.values())).kernel if ests else "", "targets": rows}
