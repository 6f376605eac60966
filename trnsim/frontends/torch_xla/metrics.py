"""``torch_xla.debug.metrics``: the compile and execute counters of the recording session."""
from __future__ import annotations

from typing import List, Optional

from . import session as _session


def _counts():
    s = _session.current()
    if s is None:
        return 0, 0
    return len(s.graphs), len(s.steps)


def metric_names() -> List[str]:
    """Names of the metrics the shim keeps."""
    return ["CompileTime", "ExecuteTime"]


def counter_value(name: str) -> Optional[int]:
    """``UncachedCompile`` (distinct graphs) and ``ExecuteGraph`` counts, else None."""
    compiled, executed = _counts()
    return {"UncachedCompile": compiled, "CachedCompile": executed - compiled, "ExecuteGraph": executed}.get(name)


def metric_data(name: str):
    """(number of samples, accumulated value, samples) for CompileTime / ExecuteTime."""
    compiled, executed = _counts()
    n = {"CompileTime": compiled, "ExecuteTime": executed}.get(name)
    return None if n is None else (n, 0.0, [])


def metrics_report() -> str:
    """A short text report in torch_xla's style."""
    compiled, executed = _counts()
    return (f"Metric: CompileTime\n  TotalSamples: {compiled}\nMetric: ExecuteTime\n  TotalSamples: {executed}\n"
            f"Counter: UncachedCompile\n  Value: {compiled}\nCounter: ExecuteGraph\n  Value: {executed}\n")


def short_metrics_report(counter_names=None, metric_names=None) -> str:
    """Same as ``metrics_report``."""
    return metrics_report()
