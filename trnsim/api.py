"""Top-level conveniences: trace a kernel run."""
from __future__ import annotations

from typing import Any

from .ir.trace import Trace


def trace(kernel: Any, *args, **kwargs) -> Trace:
    """Run ``kernel`` (a jit kernel, a wrapped kernel or a plain NKI function) on the simulated
    NeuronCore and return the instruction trace of core 0 (``trace_all`` gives every core)."""
    from .nki.harness import run_traced
    return run_traced(kernel, *args, **kwargs).traces[0]


def trace_all(kernel: Any, *args, **kwargs):
    from .nki.harness import run_traced
    return run_traced(kernel, *args, **kwargs).traces
