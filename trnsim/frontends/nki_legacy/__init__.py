"""``neuronxcc.nki`` (legacy NKI 0.1 harness): jit, baremetal, benchmark, profile, simulate_kernel,
trace.  Every entry point runs the kernel on the simulated NeuronCore."""
from __future__ import annotations

import os
from typing import Any, Callable, Optional

from ...errors import LaunchError
from ...nki.harness import Kernel, as_kernel, last_run
from . import compiler, constants, isa, language, typing  # noqa: F401
from .language import tensor  # noqa: F401

_MODES = ("auto", "jax", "torchxla", "baremetal", "benchmark", "simulation", "trace")


def jit(func: Optional[Callable] = None, mode: str = "auto", **kw):
    """Mark an NKI kernel.  ``mode='trace'`` sub-kernels run inline when called from a kernel."""
    if mode not in _MODES:
        raise LaunchError(f"unknown nki.jit mode {mode!r}", rule="jit-mode", limit=_MODES, value=mode)

    def wrap(f):
        return Kernel(f, api="legacy", mode=mode, trace_mode=(mode == "trace"),
                      platform_target=kw.get("platform_target"), options=kw)
    return wrap(func) if func is not None else wrap


def trace(func: Optional[Callable] = None, **kw):
    """Tracing-only kernels (sub-kernels, or kernels that store into their output arguments)."""
    def wrap(f):
        return Kernel(f, api="legacy", mode="trace", trace_mode=True, options=kw)
    return wrap(func) if func is not None else wrap


class _Wrapped:
    """A kernel wrapped by baremetal/benchmark/profile: callable and indexable with a grid."""

    def __init__(self, kernel: Kernel, **opts):
        self._trnsim_kernel = kernel
        self.opts = opts

    def __getitem__(self, grid):
        return type(self)(self._trnsim_kernel[grid], **self.opts)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return self._trnsim_kernel(*args, **kwargs)


class baremetal(_Wrapped):
    """Device run with numpy in and out; here the simulated device."""

    def __new__(cls, kernel=None, **opts):
        if kernel is None:
            return lambda k: cls(k, **opts)
        return super().__new__(cls)

    def __init__(self, kernel=None, **opts):
        super().__init__(as_kernel(kernel), **opts)


class _Latency:
    def __init__(self, samples_us):
        import numpy as np
        self._s = np.asarray(samples_us, dtype=float)

    def get_latency_percentile(self, p):
        import numpy as np
        return float(np.percentile(self._s, p))


class _BenchResult:
    def __init__(self, latency_us: float, iters: int):
        self.nc_latency = _Latency([latency_us] * max(int(iters), 1))


class benchmark(_Wrapped):
    """Run the kernel and report its latency from trnsim's timing model (µs percentiles).
    The simulated latency is deterministic, so every percentile is the same figure."""

    def __new__(cls, kernel=None, **opts):
        if kernel is None:
            return lambda k: cls(k, **opts)
        return super().__new__(cls)

    def __init__(self, kernel=None, warmup: int = 10, iters: int = 100, **opts):
        super().__init__(as_kernel(kernel), warmup=warmup, iters=iters, **opts)
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        from ...timing import estimate_run
        res = self._trnsim_kernel.run(*args, **kwargs)
        est = estimate_run(res)
        self.benchmark_result = _BenchResult(est.latency_us, self.opts.get("iters", 100))
        trace_name = self.opts.get("save_trace_name")
        if trace_name:
            from ...profile.perfetto import write_perfetto
            write_perfetto(est, trace_name)
        return res.outputs


class profile(_Wrapped):
    """Run the kernel and write trnsim's profile artifacts into ``working_directory``."""

    def __new__(cls, func=None, **opts):
        if func is None:
            return lambda k: cls(k, **opts)
        return super().__new__(cls)

    def __init__(self, func=None, **opts):
        super().__init__(as_kernel(func), **opts)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        res = self._trnsim_kernel.run(*args, **kwargs)
        wd = self.opts.get("working_directory")
        if wd:
            from ...profile.artifacts import write_profile_artifacts
            write_profile_artifacts(res, wd, self.opts)
        return res.outputs


def simulate_kernel(kernel, *args, **kwargs):
    """Run ``kernel`` on the CPU and return what it returns (HBM tensors as numpy arrays)."""
    __tracebackhide__ = True
    return as_kernel(kernel).run(*args, **kwargs).outputs


class FrameworkKernel:
    """Placeholder for framework integration (JAX/XLA custom calls are not simulated)."""

    def __init__(self, *a, **kw):
        raise LaunchError("FrameworkKernel (JAX/XLA custom-call integration) is not simulated; "
                          "call the kernel with numpy arrays or torch tensors",
                          rule="unsupported-api", value="FrameworkKernel")
