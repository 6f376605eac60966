"""New-API kernel objects: ``jit``, ``simulate``, ``kernel[lnc]`` launches (what the ``nki`` package
exports and ``nki.collectives.run_ranks`` launches)."""
from __future__ import annotations

import functools
from typing import Callable, Optional

from ...errors import LaunchError
from ...nki import harness as _harness
from ...nki.core.tensor import NkiTensor


class Kernel(_harness.Kernel):
    """A new-API kernel: ``kernel(*args)``, ``kernel[lnc](*args)`` with lnc 1 or 2."""

    def __getitem__(self, lnc) -> "Kernel":
        if isinstance(lnc, tuple):
            if len(lnc) != 1:
                raise LaunchError("new-API kernels launch as kernel[lnc] with one number (1 or 2)",
                                  rule="lnc-launch", limit="kernel[1] or kernel[2]", value=lnc)
            lnc = lnc[0]
        if isinstance(lnc, bool) or not isinstance(lnc, int) or lnc not in (1, 2):
            raise LaunchError(f"the LNC degree must be 1 or 2, got {lnc!r}", rule="lnc-value",
                              limit="1 or 2", value=repr(lnc))
        return self._replace(lnc=int(lnc))

    def run(self, *args, options=None, **kwargs):
        """Run the kernel (its returned tensors checked to live in shared HBM); the full RunResult."""
        __tracebackhide__ = True
        checked = self._replace(fn=_checked_outputs(self.fn))
        return _harness.Kernel.run(checked, *args, options=options, **kwargs)

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        from ...nki.core.context import maybe_current
        if maybe_current() is not None:
            # a decorated sub-kernel called from a kernel runs inline, at the caller's level
            return self.fn(*args, **kwargs)
        return self.run(*args, **kwargs).outputs


def _checked_outputs(fn: Callable) -> Callable:
    """The kernel function, checking what it returns: new-API outputs live in shared HBM (an
    ``nl.hbm`` or ``nl.private_hbm`` tensor cannot be returned)."""
    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        ret = fn(*args, **kwargs)
        _check_returned(ret)
        return ret
    return kernel


def _check_returned(ret) -> None:
    if isinstance(ret, NkiTensor):
        kind = ret._st.kind
        if kind in ("hbm", "private_hbm"):
            from ...source import describe
            loc = ret._st.loc
            raise LaunchError(f"kernel output '{ret.name}' is in nl.{kind}; new-API kernels return "
                              "tensors allocated with buffer=nl.shared_hbm",
                              rule="kernel-output-shared-hbm", limit="nl.shared_hbm",
                              value=f"nl.{kind}", where=describe(loc) if loc else None)
    elif isinstance(ret, (tuple, list)):
        for r in ret:
            _check_returned(r)
    elif isinstance(ret, dict):
        for r in ret.values():
            _check_returned(r)


def jit(fn: Optional[Callable] = None, **kw):
    """Mark a top-level NKI kernel.  ``mode=`` is accepted and ignored (deprecated);
    ``platform_target=`` selects the simulated generation, as NEURON_PLATFORM_TARGET_OVERRIDE
    does."""
    def wrap(f):
        if isinstance(f, Kernel):
            return f
        if isinstance(f, _harness.Kernel):
            f = f.fn
        return Kernel(f, api="new", mode=str(kw.get("mode", "auto")),
                      platform_target=kw.get("platform_target"), options=kw)
    return wrap(fn) if fn is not None else wrap


def _as_kernel(kernel) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, _Simulated):
        return kernel.kernel
    inner = getattr(kernel, "_trnsim_kernel", None)
    if isinstance(inner, _harness.Kernel):
        kernel = inner
    if isinstance(kernel, _harness.Kernel):
        k = Kernel(kernel.fn, api="new", platform_target=kernel.platform_target,
                   options=kernel.options)
        return k._replace(lnc=kernel.lnc) if kernel.lnc != 1 else k
    if callable(kernel):
        return Kernel(kernel, api="new")
    raise LaunchError(f"{kernel!r} is not a kernel or a function", rule="launch-kernel",
                      value=type(kernel).__name__)


class _Simulated:
    """What ``nki.simulate(kernel)`` returns: call it with numpy arrays (or torch tensors);
    ``[lnc]`` picks the LNC degree."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        functools.update_wrapper(self, kernel.fn)

    def __getitem__(self, lnc) -> "_Simulated":
        return _Simulated(self.kernel[lnc])

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        return self.kernel.run(*args, **kwargs).outputs

    def run(self, *args, **kwargs):
        """Run and return the full result (outputs and per-core traces)."""
        __tracebackhide__ = True
        return self.kernel.run(*args, **kwargs)


def simulate(kernel) -> _Simulated:
    """A CPU-simulated version of ``kernel`` (``nki.simulate(k)(*args)``, ``nki.simulate(k[2])``);
    plain functions are wrapped automatically."""
    return _Simulated(_as_kernel(kernel))


cpu_simulate = simulate
