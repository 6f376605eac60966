"""Price-performance: one workload on Trainium and GPU systems (``compare``) and the three-step migration
evaluation of a user's model (``evaluate``)."""
from .engine import Comparison, SystemRow, check_prices, compare
from .search import Choice, NoFitError, choose
from .systems import SystemRef, parse_delays, parse_systems, resolve_system
from .workload import Workload, WorkloadError

__all__ = ["Comparison", "SystemRow", "check_prices", "compare", "Choice", "NoFitError", "choose", "SystemRef",
           "parse_delays", "parse_systems", "resolve_system", "Workload", "WorkloadError"]
