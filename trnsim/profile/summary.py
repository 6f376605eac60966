"""KernelSummary: what ``trnsim kernel`` prints about a run, the timing figures and the
profile's bottleneck verdict, as one record (``to_dict`` is the JSON summary)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..timing.estimate import Estimate
from ..timing.figures import RunFigures
from .verdict import bottleneck


@dataclass(frozen=True)
class KernelSummary:
    """The figures of a run and the verdict that explains them."""
    figures: RunFigures
    bottleneck: str

    def to_dict(self) -> dict:
        """JSON-ready: the figures with ``bottleneck`` before ``sim_seconds`` (the summary's
        order since its first release)."""
        out = self.figures.to_dict()
        sim = out.pop("sim_seconds")
        out["bottleneck"] = self.bottleneck
        out["sim_seconds"] = sim
        return out


def summarize(est: Estimate, analysis: Optional[dict] = None,
              figures: Optional[RunFigures] = None) -> KernelSummary:
    """The summary of ``est``: its figures (``figures`` when the caller has them) and the verdict,
    the profile's (``analysis['verdict']``, told what engines wait on) when given, otherwise the
    verdict from the busy shares alone."""
    fig = figures if figures is not None else est.figures()
    line = analysis["verdict"] if analysis is not None else bottleneck(fig)
    return KernelSummary(fig, line)
