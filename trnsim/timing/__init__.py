"""Timing model: per-instruction costs, dependencies and a list scheduler -> latency, engine
timeline and utilization of any traced kernel on trn1 / trn2 / trn3."""
from .costs import CostModel
from .deps import dependencies
from .estimate import CoreEstimate, Estimate, estimate, estimate_run
from .figures import RunFigures
from .scheduler import Timeline, schedule

__all__ = ["CostModel", "CoreEstimate", "Estimate", "RunFigures", "Timeline", "dependencies", "estimate",
           "estimate_run", "schedule"]
