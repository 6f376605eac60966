"""The Python face of trnsim: what the ``trnsim`` command line calls and what notebooks call.

    k = load_kernel("my_kernel.py::matmul")                  # imported with the NKI shims active
    inputs = make_inputs(["a=4096x8192:bf16", "b=8192x8192:bf16"])
    est = time_kernel(k, **inputs, target="trn1")            # run + timing model -> Estimate
    print(est.latency_us, summarize(est).bottleneck)         # figures + the profile's verdict
    tr = trace(k, **inputs)                                  # the instruction trace of core 0
    costs = op_costs("trn2")                                 # per-op costs for the model layer
    e = estimate_training("llama-3-8b", "trn2.48xlarge", tp=8, costs="simulated")
    r = plan("llama-3.1-70b", "trn2-ultraserver", count=4, seq=8192, global_batch=1024)
    c = compare("llama-3.1-70b", systems=["trn2.48xlarge", "p5.48xlarge"], tokens=1e12)
"""
from __future__ import annotations

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
           "time_kernel", "summarize", "parse_shape_dtype", "op_costs", "simulated_costs",
           "estimate_training", "estimate_inference", "plan", "compare"]


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
    try:
        sp.loader.exec_module(mod)
    except SyntaxError as e:
        import traceback
        from .errors import UserCodeError
        sys.modules.pop(modname, None)
        text = (e.text or "").rstrip("\n")
        raise UserCodeError(f"syntax error in the kernel file: {e.msg}", rule="kernel-syntax",
                            value=text.strip() or None,
                            where=f"{e.filename or path}:{e.lineno}" + (f"\n    {text.strip()}" if text else ""),
                            user_traceback="".join(traceback.format_exception_only(type(e), e))) from None
    except Exception as e:
        from .errors import TrnsimError
        from .source import user_exception
        sys.modules.pop(modname, None)
        if isinstance(e, TrnsimError):
            raise
        err = user_exception(e, rule="kernel-import")
        if err is None:
            raise
        err.message = f"importing {path} failed: {err.message}"
        raise err from None
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
    """``"4096x8192:bf16"`` -> ``((4096, 8192), bfloat16)``; the dtype defaults to float32
    (spellings: ``trnsim.validate.DTYPE_SPELLINGS``)."""
    from .validate import parse_shape_dtype as parse
    return parse(spec)


def make_inputs(specs: Iterable[str] = (), seed: int = 0, numerics: bool = True,
                npz: Optional[str] = None, *, target: Optional[str] = None,
                hardware: Optional[str] = None) -> Dict[str, Any]:
    """Kernel inputs by parameter name from ``NAME=SHAPE:DTYPE`` specs (random normal floats,
    integers in [0, 16); zeros when ``numerics`` is off) or ``NAME=VALUE`` Python literals,
    then the arrays of an ``npz`` file (which win).  Inputs over the simulated chip's HBM (or,
    with numerics, this machine's memory) are a CapacityError before anything is allocated."""
    import ml_dtypes  # noqa: F401  (registers bf16/fp8 with numpy)
    from .errors import CapacityError
    from .hardware import load_catalog
    from .validate import check_input_size, host_memory_bytes, load_npz, parse_arg
    from .checks import as_sequence, check_params
    specs = check_params(specs=as_sequence(specs))["specs"]
    parsed: Dict[str, Any] = {}
    for a in specs:
        name, value = parse_arg(a)
        if name in parsed:
            raise ConfigError(f"argument {name} is given twice", rule="arg-duplicate", value=name,
                              where=f"--arg {a}")
        parsed[name] = (a, value)
    opts = Options.from_env(**({"target": target} if target else {}),
                            **({"hardware_file": hardware} if hardware else {}))
    hbm = load_catalog(opts.hardware_file).chip_for(opts.target).hbm_bytes
    host = host_memory_bytes() if numerics else None  # timing-only zeros are never touched
    total = 0
    for name, (a, value) in parsed.items():
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], np.dtype):
            shape, d = value
            total += check_input_size(name, shape, d, hbm_bytes=hbm, host_bytes=host, where=f"--arg {a}")
    for lim, what in ((hbm, "HBM of the simulated chip"), (host, "memory of this machine")):
        if lim is not None and total > lim:
            raise CapacityError(f"the inputs together need {total:,} bytes, more than the {what}",
                                rule="input-capacity", limit=f"{lim:,} bytes", value=f"{total:,} bytes",
                                where=" ".join(f"--arg {a}" for a, _ in parsed.values()))
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError("the seed of the random inputs must be a non-negative integer", rule="option-value",
                          limit=">= 0", value=seed, where=f"--seed {seed}")
    rng = np.random.default_rng(seed)
    out: Dict[str, Any] = {}
    for name, (a, value) in parsed.items():
        if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], np.dtype)):
            out[name] = value
            continue
        shape, d = value
        try:
            if not numerics:
                out[name] = np.zeros(shape, dtype=d)  # pages stay untouched: timing-only
            elif d.kind in "iu" or d.kind == "b":
                out[name] = rng.integers(0, 2 if d.kind == "b" else 16, size=shape).astype(d)
            else:
                out[name] = rng.standard_normal(shape, dtype=np.float32).astype(d)
        except MemoryError:
            raise CapacityError(f"input {name} does not fit in this machine's free memory",
                                rule="input-capacity", value=f"{shape} {d}", where=f"--arg {a}",
                                hint="use --timing-only, which never fills the inputs") from None
    if npz:
        out.update(load_npz(npz))
    return out


def bind_inputs(kernel: Any, inputs: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any]]:
    """Split named inputs into ``(args, kwargs)`` by the kernel's signature: declared names go by
    keyword, unnamed npz arrays (``arr_0``...) positionally; unknown or missing names are ConfigErrors."""
    import re
    fn = getattr(kernel_of(kernel), "fn", kernel)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable: pass everything by keyword
        return [], dict(inputs)
    params = sig.parameters
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    args, kwargs = [], {}
    for name, v in inputs.items():
        if name in params and params[name].kind is not params[name].VAR_POSITIONAL:
            kwargs[name] = v
        elif re.fullmatch(r"arr_\d+", name):
            args.append(v)
        elif var_kw:
            kwargs[name] = v
        else:
            raise ConfigError(f"kernel {getattr(fn, '__name__', '?')} has no parameter {name!r}",
                              rule="kernel-args", limit=named, value=name, where=f"--arg {name}=...")
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        bound = set(named[:len(args)]) | set(kwargs)
        missing = [n for n, p in params.items() if p.default is p.empty and n not in bound
                   and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        msg = (f"kernel {getattr(fn, '__name__', '?')} needs {', '.join(missing)}" if missing else str(e))
        raise ConfigError(msg, rule="kernel-args", limit=named,
                          value=f"given: {', '.join(kwargs) or 'none'}", where="--arg", hint="give each one with --arg NAME=SHAPE:DTYPE or --inputs FILE.npz") from None
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


COSTS = ("roofline", "simulated")


def simulated_costs(target: str, lnc: Optional[int] = None, hardware_file: Optional[str] = None,
                    attention_impl: str = "fused"):
    """Simulated op costs of ``target`` at ``lnc`` (module level: the planner's worker processes unpickle
    it and call it once per LNC); ``attention_impl`` "fused" (the NKI kernels) or "unfused" (the eager
    fallback: QK^T, softmax and PV as separate kernels with the scores in HBM)."""
    return op_costs(target, hardware_file, lnc=lnc, attention_impl=attention_impl)


def _costs_for(costs: Any, instance: str, lnc: Optional[int], hardware: Optional[str],
               attention_impl: Optional[str] = None):
    """The OpCosts an estimate gets from ``costs``: None/"roofline" (the catalog roofline), "simulated"
    (reference kernels on the timing model, attention as ``attention_impl``), or an OpCosts object as it is."""
    if attention_impl not in (None, "fused") and costs != "simulated":
        raise ConfigError("an attention implementation is chosen among the simulated reference kernels",
                          rule="attention-impl", limit="costs='simulated'", value=costs)
    if costs is None or costs == "roofline":
        return None
    if costs != "simulated":
        if isinstance(costs, str):
            raise ConfigError(f"unknown op-cost source {costs!r}", rule="costs", limit=COSTS, value=costs)
        return costs
    return simulated_costs(_neuron_system(instance, hardware).target, lnc, hardware, attention_impl or "fused")


def _neuron_system(instance: str, hardware: Optional[str]):
    """The system ``instance``, which simulated op costs need to be a Trainium one (they run NKI kernels)."""
    from .model.system import make_system
    system = make_system(instance, hardware_file=hardware)
    if system.rank_name != "NeuronCore":
        raise ConfigError(f"--costs simulated runs NKI reference kernels: it needs a Trainium system, not "
                          f"{instance}", rule="costs", limit="roofline on a GPU system", value="simulated")
    return system


def estimate_training(model, instance: str = "trn1.32xlarge", costs: Any = "roofline", **kwargs):
    """``trnsim.model.estimate_training`` with ``costs`` wired (``COSTS`` or an OpCosts); a layout that does
    not fit is refused with the nearest layouts that do, from the planner."""
    from .model import estimate_training as estimate
    from .model.memory import MemoryFitError
    c = _costs_for(costs, instance, kwargs.get("lnc"), kwargs.get("hardware_file"),
                   kwargs.pop("attention_impl", None))
    try:
        return estimate(model, instance, costs=c, **kwargs)
    except MemoryFitError as e:
        raise e.with_suggestions(_training_hints(model, instance, kwargs)) from None


def estimate_inference(model, instance: str = "trn2.48xlarge", costs: Any = "roofline", **kwargs):
    """``trnsim.model.estimate_inference`` with ``costs`` wired; a replica that does not fit is refused with
    the nearest larger one that does, from the planner."""
    from .model import estimate_inference as estimate
    from .model.memory import MemoryFitError
    c = _costs_for(costs, instance, kwargs.get("lnc"), kwargs.get("hardware_file"),
                   kwargs.pop("attention_impl", None))
    try:
        return estimate(model, instance, costs=c, **kwargs)
    except MemoryFitError as e:
        raise e.with_suggestions(_inference_hints(model, instance, kwargs)) from None


def _context(model, instance: str, kw: Dict[str, Any], training: bool):
    from .model.context import make_context
    return make_context(model, instance, kw.get("nodes", 1), kw.get("lnc"), kw.get("precision", "bf16"),
                        kw.get("sparsity"), None, None, kw.get("hardware_file"), training=training)


def _training_hints(model, instance: str, kw: Dict[str, Any]) -> List[str]:
    """The planner's nearest fitting training layouts for the refused estimate's arguments."""
    from .model.parallel import Parallel, resolve
    from .plan.hints import nearest_training
    ctx = _context(model, instance, kw, True)
    over = {**ctx.system.memory_overrides(), **(kw.get("overrides") or {})}
    # settings left to the training framework (None) are searched from the historical layout's defaults
    par = resolve(Parallel(**{k: d if kw.get(k) is None else kw[k]
                              for k, d in (("tp", 1), ("pp", 1), ("dp", 0), ("cp", 1), ("ep", 1), ("vp", 1),
                                           ("sp", False), ("zero", 0))}), ctx.cfg, ctx.system)
    return nearest_training(ctx.cfg, par, ctx.system.cores, float(ctx.system.hbm_bytes_per_core),
                            kw.get("micro_batch", 1), kw.get("seq", 2048), kw.get("recompute") or "none",
                            kw.get("global_batch", 0), over, tp_cap=ctx.system.fast_domain)


def _inference_hints(model, instance: str, kw: Dict[str, Any]) -> List[str]:
    """The planner's nearest larger serving replica that the estimator accepts, for the refused arguments."""
    from .model import estimate_inference as estimate
    from .plan.hints import nearest_inference
    system = _context(model, instance, kw, False).system

    def fits(tp: int, pp: int) -> bool:
        try:
            estimate(model, instance, **{**kw, "tp": tp, "pp": pp, "rate": None})
        except ConfigError:
            return False
        return True
    return nearest_inference(kw.get("tp", 1), kw.get("pp", 1), system.cores // max(1, kw.get("replicas", 1)),
                             fits, tp_cap=system.fast_domain)


def plan(model, system: str, costs: Any = "roofline", objective: str = "time", prices: Optional[Any] = None,
         pue: Optional[float] = None, **kwargs):
    """``trnsim.plan.plan`` with op costs wired (``COSTS``; simulated ones built in each worker) and, for
    ``objective`` cost or energy, the price (a ``PriceBook``, default the published on-demand prices) or the
    power model (at ``pue``) from ``trnsim.cost``."""
    from .plan import plan as search
    if costs == "simulated":
        _neuron_system(system, kwargs.get("hardware_file"))
        factory = simulated_costs
    elif costs is None or costs == "roofline":
        factory = None
    elif isinstance(costs, str):
        raise ConfigError(f"unknown op-cost source {costs!r}", rule="costs", limit=COSTS, value=costs)
    else:
        factory = costs
    price, power = kwargs.pop("price", None), kwargs.pop("power", None)
    if objective == "cost" and price is None:
        from .cost import PriceBook
        price = (prices or PriceBook.load()).hourly
    if objective == "energy" and power is None:
        from .cost import load_power_model, system_power
        pm = load_power_model().with_overrides(pue=pue) if pue is not None else load_power_model()
        power = lambda key, u: system_power(key, u, pm).facility_watts  # noqa: E731
    return search(model, system, objective=objective, costs=factory, price=price, power=power, **kwargs)


def compare(model, systems: Optional[Sequence[str]] = None, task: str = "train", prices: Optional[Any] = None,
            pue: Optional[float] = None, baseline: Optional[str] = None,
            start_delays: Optional[Dict[str, float]] = None, full_search: bool = False,
            progress: Optional[Any] = None, **workload):
    """Time, cost and energy of one workload on each system (``trnsim.compare``; default systems: the
    task's list), each at the best layout the planner finds (``full_search``: its whole default space).
    ``workload``: the fields of ``compare.options.make_workload`` (tokens, seq, rate, ...)."""
    from .compare import compare as run, parse_systems
    from .compare.options import make_power, make_prices, make_workload
    from .compare.search import chooser
    w = make_workload(model, task, **workload)
    refs = parse_systems(",".join(systems) if systems else None, task)
    if baseline is None:
        baseline = next((r.key for r in refs if r.key == "p5.48xlarge"), refs[0].key)
    return run(w, refs, prices or make_prices(), make_power(pue), baseline, start_delays,
               choose_fn=chooser(full_search), progress=progress)


# ------------------------------------------------------------------------------ profile
def profile(est, top: int = 20, figures: Any = None) -> dict:
    """What the profile explains about an Estimate (hotspots, stalls, critical path, DMA detail,
    speed of light, memory over time, verdict): ``trnsim.profile.insight.analyze``; ``figures``:
    ``est.figures()`` when the caller has them."""
    from .profile.insight import analyze
    return analyze(est, top=top, figures=figures)


def summarize(est, analysis: Optional[dict] = None, figures: Any = None):
    """What ``trnsim kernel`` prints about an Estimate: a ``KernelSummary`` record (its ``figures``
    and the profile's ``bottleneck`` verdict, told what engines wait on when ``analysis`` is
    ``profile(est)``); ``.to_dict()`` is the JSON summary."""
    from .profile.summary import summarize as summ
    return summ(est, analysis=analysis, figures=figures)


def compare_targets(kernel: Any, *args, targets: Sequence[str], options: Optional[Options] = None,
                    **kwargs) -> Dict[str, Any]:
    """Run and time ``kernel`` on each target (each its own run: the trace checks the target's
    rules, e.g. tile sizes and dtypes); returns {canonical target: Estimate} in the given order."""
    from .options import canonical_target
    if not targets:
        raise ConfigError("no target to compare", rule="targets", limit="one or more targets",
                          value="", hint="e.g. --target trn1,trn2,trn3")
    options = options or Options.from_env()
    out: Dict[str, Any] = {}
    for t in targets:
        name = canonical_target(t, options.hardware_file)
        if name not in out:
            out[name] = time_kernel(kernel, *args, options=options.replace(target=name), **kwargs)
    return out


def compare_figures(ests: Dict[str, Any], analyses: Optional[Dict[str, dict]] = None):
    """The per-target figures of ``compare_targets`` side by side: a ``TargetComparison`` record
    (``.to_dict()`` for JSON); ``analyses``: per target, ``profile(est)``, whose verdicts it shows."""
    from .profile.insight.targets import side_by_side
    return side_by_side(ests, analyses)
