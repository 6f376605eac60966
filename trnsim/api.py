"""The Python face of trnsim: what the ``trnsim`` command line calls and what notebooks call.

    k = load_kernel("my_kernel.py::matmul")                  # imported with the NKI shims active
    inputs = make_inputs(["a=4096x8192:bf16", "b=8192x8192:bf16"])
    est = time_kernel(k, **inputs, target="trn1")            # run + timing model -> Estimate
    print(est.latency_us, est.summary()["bottleneck"])
    tr = trace(k, **inputs)                                  # the instruction trace of core 0
    costs = op_costs("trn2")                                 # per-op costs for the model layer
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .errors import ConfigError
from .ir.trace import Trace
from .options import Options

__all__ = ["trace", "trace_all", "load_kernel", "make_inputs", "bind_inputs", "kernel_of",
           "time_kernel", "parse_shape_dtype", "op_costs"]


def trace(kernel: Any, *args, **kwargs) -> Trace:
    """Run ``kernel`` (a jit kernel, a wrapped kernel or a plain NKI function) on the simulated
    NeuronCore and return the instruction trace of core 0 (``trace_all`` gives every core)."""
    from .nki.harness import run_traced
    return run_traced(kernel, *args, **kwargs).traces[0]


def trace_all(kernel: Any, *args, **kwargs) -> List[Trace]:
    """Like ``trace`` but one trace per logical core (LNC=2 and SPMD launches give several)."""
    from .nki.harness import run_traced
    return run_traced(kernel, *args, **kwargs).traces


# ------------------------------------------------------------------------------ loading kernels
def load_kernel(path_or_spec: str, func: Optional[str] = None) -> Any:
    """Import a kernel from a file with the NKI import shims active: ``load_kernel("k.py::f")``
    or ``load_kernel("k.py", "f")``.  Returns the object the file defines under that name."""
    path = str(path_or_spec)
    if func is None:
        if "::" not in path:
            raise ConfigError("name the kernel as FILE::FUNC, e.g. my_kernel.py::matmul",
                              rule="kernel-spec", value=path)
        path, func = path.rsplit("::", 1)
    if not os.path.exists(path):
        raise ConfigError(f"kernel file not found: {path}", rule="kernel-file", value=path)
    from .compat import install
    install()
    # the kernel's own folder first, as `python file.py` would have it (sibling helper modules)
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    modname = "_trnsim_user_" + os.path.splitext(os.path.basename(path))[0]
    sp = importlib.util.spec_from_file_location(modname, path)
    if sp is None or sp.loader is None:
        raise ConfigError(f"cannot import {path} as Python", rule="kernel-file", value=path)
    mod = importlib.util.module_from_spec(sp)
    sys.modules[modname] = mod
    sp.loader.exec_module(mod)
    if not hasattr(mod, func):
        names = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")]
        raise ConfigError(f"{path} has no kernel named {func!r}", rule="kernel-name",
                          limit=names, value=func)
    return getattr(mod, func)


def kernel_of(obj: Any, *, api: Optional[str] = None, grid: Optional[Sequence[int]] = None,
              lnc: Optional[int] = None):
    """The launchable kernel behind ``obj`` (a jit kernel, a wrapped one or a plain function,
    the latter written in ``api`` 'legacy' or 'new'), with a legacy SPMD ``grid`` or an ``lnc``."""
    from .nki.harness import Kernel, as_kernel
    if api not in (None, "legacy", "new"):
        raise ConfigError("api must be 'legacy' or 'new'", rule="kernel-api",
                          limit=("legacy", "new"), value=api)
    k = obj if isinstance(obj, Kernel) else as_kernel(obj, api=api or "legacy")
    if grid:
        k = k[tuple(int(x) for x in grid)]
    if lnc:
        k = k._replace(lnc=int(lnc))
    return k


# ------------------------------------------------------------------------------- making inputs
def parse_shape_dtype(spec: str) -> Tuple[Tuple[int, ...], np.dtype]:
    """``"4096x8192:bf16"`` -> ``((4096, 8192), bfloat16)``; the dtype defaults to float32."""
    from .nki.core import dtypes as dt
    shape_s, dtype_s = spec.split(":", 1) if ":" in spec else (spec, "float32")
    try:
        shape = tuple(int(x) for x in shape_s.lower().replace("*", "x").split("x") if x)
    except ValueError:
        raise ConfigError(f"cannot read the shape in {spec!r}", rule="arg-shape",
                          limit="e.g. 4096x8192:bf16", value=spec) from None
    if not shape or any(s <= 0 for s in shape):
        raise ConfigError(f"shape must be positive integers: {spec!r}", rule="arg-shape", value=spec)
    return shape, dt.as_dtype(dtype_s)


def make_inputs(specs: Iterable[str] = (), seed: int = 0, numerics: bool = True,
                npz: Optional[str] = None) -> Dict[str, Any]:
    """Kernel inputs by parameter name from ``NAME=SHAPE:DTYPE`` specs (random normal floats,
    integers in [0, 16); zeros when ``numerics`` is off) or ``NAME=VALUE`` Python literals,
    then the arrays of an ``npz`` file (which win)."""
    import ml_dtypes  # noqa: F401  (registers bf16/fp8 with numpy)
    rng = np.random.default_rng(seed)
    out: Dict[str, Any] = {}
    for a in specs:
        if "=" not in a:
            raise ConfigError(f"--arg takes NAME=SHAPE:DTYPE or NAME=VALUE, got {a!r}", rule="arg",
                              value=a)
        name, spec = a.split("=", 1)
        looks_like_shape = all(c.isdigit() or c in "xX*" for c in spec.split(":")[0]) and \
            ("x" in spec.lower() or ":" in spec)
        if looks_like_shape:
            shape, d = parse_shape_dtype(spec)
            if not numerics:
                out[name] = np.zeros(shape, dtype=d)  # pages stay untouched: timing-only
            elif d.kind in "iu":
                out[name] = rng.integers(0, 16, size=shape).astype(d)
            else:
                out[name] = rng.standard_normal(shape, dtype=np.float32).astype(d)
        else:
            try:
                out[name] = ast.literal_eval(spec)
            except (ValueError, SyntaxError):
                out[name] = spec
    if npz:
        if not os.path.exists(npz):
            raise ConfigError(f"inputs file not found: {npz}", rule="inputs-file", value=npz)
        with np.load(npz) as f:
            for name in f.files:
                out[name] = f[name]
    return out


def bind_inputs(kernel: Any, inputs: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any]]:
    """Split named inputs into ``(args, kwargs)``: names the kernel declares go by keyword, the
    rest positionally in the order given."""
    fn = getattr(kernel_of(kernel), "fn", kernel)
    params = set(inspect.signature(fn).parameters)
    args, kwargs = [], {}
    for name, v in inputs.items():
        if name in params:
            kwargs[name] = v
        else:
            args.append(v)
    return args, kwargs


# ------------------------------------------------------------------------------------- timing
def time_kernel(kernel: Any, *args, target: Optional[str] = None,
                timing_only: Optional[bool] = None, hardware: Optional[str] = None,
                fast_forward: Optional[str] = None, options: Optional[Options] = None,
                **kwargs):
    """Run ``kernel(*args, **kwargs)`` on the simulated NeuronCore and time it: an ``Estimate``
    (latency, engine shares, HFU, HBM traffic).  ``target``/``hardware`` pick the generation and a
    hardware file (a what-if generation works the same); unset ones come from the environment."""
    from .timing import estimate_run
    over: Dict[str, Any] = {}
    if target is not None:
        over["target"] = target
    if hardware is not None:
        over["hardware_file"] = hardware
    if timing_only is not None:
        over["timing_only"] = bool(timing_only)
    if fast_forward is not None:
        over["fast_forward"] = fast_forward
    if options is None:
        # the hardware file must be known before the target is checked against its names
        options = Options.from_env(**over)
    elif over:
        options = options.replace(**over)
    res = kernel_of(kernel).run(*args, options=options, **kwargs)
    return estimate_run(res)


# ------------------------------------------------------------------------------ op-cost table
def op_costs(target: str = "trn2", hardware: Optional[str] = None, **kwargs):
    """The model layer's op-cost table for ``target``: trnsim's reference NKI kernels timed on the
    timing model (cached on disk).  ``kwargs`` go to ``trnsim.model.opcost.SimulatedOpCosts``."""
    from .kernels import time_reference
    from .model.opcost import SimulatedOpCosts
    kwargs.setdefault("timer", time_reference)
    return SimulatedOpCosts(target, hardware_file=hardware, **kwargs)
