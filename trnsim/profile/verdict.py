"""The bottleneck verdict: one line naming the engine that bounds a run and what the others do
meanwhile, read from the timing figures (and, when the profile has them, the stall attribution
and the roofline point)."""
from __future__ import annotations

from typing import Dict, Optional

from ..timing.figures import RunFigures

# below this busy share no engine bounds the run: dependencies and fixed costs do
BOUND_SHARE = 0.5
# the stall attribution's name for the idle time after an engine's last instruction (not a wait)
AFTER_LAST = "after its last instruction"


def bottleneck(fig: RunFigures, waits: Optional[Dict[str, Dict[str, float]]] = None) -> str:
    """One line naming the bound engine and what the others do meanwhile: the Tensor engine's
    idle share when the kernel has matmuls; otherwise what the bound engine (or, DMA-bound,
    the busiest compute engine) waits on. ``waits``: per engine label, its idle ns per engine
    or DMA queue it waited on (the profile's stall attribution); without it, the busiest
    other engine is named."""
    shares = fig.engines
    dma_any = shares.get("DMA (any queue)", 0.0)
    cand = {k: v for k, v in shares.items() if not k.startswith("DMA")}
    cand["DMA"] = dma_any
    bound, share = max(cand.items(), key=lambda kv: kv[1])
    pe = shares.get("Tensor", 0.0)
    mean_q = shares.get("DMA (mean of queues)", 0.0)
    if share < BOUND_SHARE:
        return (f"latency-bound: no engine is busy more than {share:.0%} "
                f"(dependencies and fixed costs dominate)")
    if bound == "DMA":
        head = (f"DMA-bound: the {fig.dma_queues} queues are busy {mean_q:.0%} (some queue active "
                f"{dma_any:.0%})")
    elif bound == "Tensor":
        return f"Tensor-bound: the PE array is busy {pe:.0%}; DMA is active {dma_any:.0%}"
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
    named = {k: v for k, v in ((waits or {}).get(who) or {}).items() if k != AFTER_LAST}
    lat = fig.latency_ns or 1.0
    if named:
        k, v = max(named.items(), key=lambda kv: kv[1])
        subject = "its idle time is spent mostly" if who == bound else \
            f"{who} (busy {busy:.0%}) spends its idle time mostly"
        return f"{head}; no matmul: {subject} waiting on {k} ({v / lat:.0%} of the run)"
    others = {k: v for k, v in cand.items() if k not in (bound, "Tensor")}
    k, v = max(others.items(), key=lambda kv: kv[1])
    return f"{head}; no matmul (Tensor engine unused); next busiest: {k} {v:.0%}"


def with_roofline(line: str, sol: Optional[dict]) -> str:
    """``line`` followed by the roofline point when the kernel does PE work."""
    if sol is not None and sol["flops"]:
        line += f"; roofline: {sol['bound']}-bound (intensity {sol['arithmetic_intensity']:.1f} " \
                f"FLOP/B vs ridge {sol['ridge_point']:.1f})"
    return line
