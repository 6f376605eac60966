"""``trnsim kernel FILE::FUNC --arg a=4096x8192:bf16 ...``: run a kernel on the simulated NeuronCore,
time it, print the summary (or --json) and write Perfetto / HTML / Parquet profiles."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np

from ..errors import ConfigError


def register(sub) -> None:
    p = sub.add_parser("kernel", help="run an NKI kernel, estimate its latency and profile it",
                       description="Run FILE::FUNC on a simulated NeuronCore and report estimated "
                       "latency, per-engine busy shares, HFU, HBM traffic and the bottleneck.")
    p.add_argument("target_spec", metavar="FILE::FUNC", help="kernel file and function name")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                   help="random input, e.g. a=4096x8192:bf16 (or NAME=VALUE for a Python literal)")
    p.add_argument("--inputs", metavar="FILE.npz", help="real inputs by parameter name")
    p.add_argument("--target", default=None, help="trn1 | trn2 | trn3 (default: $TRNSIM_TARGET or trn2)")
    p.add_argument("--grid", default=None, help="legacy SPMD launch grid, e.g. 2,4")
    p.add_argument("--lnc", type=int, default=None, help="new-API logical NeuronCore count (1 or 2)")
    p.add_argument("--api", choices=("legacy", "new"), default=None,
                   help="for plain functions: which NKI generation they are written in")
    p.add_argument("--timing-only", action="store_true",
                   help="skip numerics (shapes, regions and dependencies are still tracked)")
    p.add_argument("--fast-forward", choices=("auto", "all", "off"), default=None,
                   help="timing-only: synthesize regular loop iterations instead of running them "
                        "(auto: legacy affine/sequential loops; all: also new-API loops; "
                        "default $TRNSIM_FAST_FORWARD or auto)")
    p.add_argument("--trace", metavar="FILE.json", help="write a Perfetto / Chrome trace")
    p.add_argument("--trace-limit", type=int, default=None, metavar="N",
                   help="instructions per core written to --trace (default: as many as fit in "
                        "1M slices, which the Perfetto UI still loads; 0 writes all)")
    p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML report")
    p.add_argument("--parquet", metavar="DIR", help="write Instruction/DmaPacket/Summary Parquet "
                   "tables (needs pyarrow)")
    p.add_argument("--hardware", metavar="FILE.toml", help="hardware figures merged over the catalog")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def parse_shape_dtype(spec: str) -> Tuple[Tuple[int, ...], Any]:
    from ..nki.core import dtypes as dt
    if ":" in spec:
        shape_s, dtype_s = spec.split(":", 1)
    else:
        shape_s, dtype_s = spec, "float32"
    try:
        shape = tuple(int(x) for x in shape_s.lower().replace("*", "x").split("x") if x)
    except ValueError:
        raise ConfigError(f"cannot read the shape in {spec!r}", rule="arg-shape",
                          limit="e.g. 4096x8192:bf16", value=spec) from None
    if not shape or any(s <= 0 for s in shape):
        raise ConfigError(f"shape must be positive integers: {spec!r}", rule="arg-shape", value=spec)
    return shape, dt.as_dtype(dtype_s)


def make_inputs(args: List[str], seed: int, numerics: bool) -> Dict[str, Any]:
    import ml_dtypes  # noqa: F401  (registers bf16/fp8 with numpy)
    rng = np.random.default_rng(seed)
    out: Dict[str, Any] = {}
    for a in args:
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
    return out


def load_kernel(spec: str):
    if "::" not in spec:
        raise ConfigError("name the kernel as FILE::FUNC, e.g. my_kernel.py::matmul",
                          rule="kernel-spec", value=spec)
    path, func = spec.rsplit("::", 1)
    if not os.path.exists(path):
        raise ConfigError(f"kernel file not found: {path}", rule="kernel-file", value=path)
    from ..compat import install
    install()
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    modname = "_trnsim_user_" + os.path.splitext(os.path.basename(path))[0]
    sp = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(sp)
    sys.modules[modname] = mod
    sp.loader.exec_module(mod)
    if not hasattr(mod, func):
        names = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")]
        raise ConfigError(f"{path} has no kernel named {func!r}", rule="kernel-name",
                          limit=names, value=func)
    return getattr(mod, func)


class _Progress:
    """A transient progress line (instructions simulated) for runs longer than a second."""

    def __init__(self, enabled: bool, label: str = ""):
        self.enabled = enabled
        self.label = label  # a fixed description; empty: count the instructions simulated
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        if not self.enabled:
            return self
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from ..nki import harness

        def loop():
            if self.stop.wait(1.0):
                return
            from rich.console import Console
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                          transient=True, console=Console(stderr=True)) as prog:
                task = prog.add_task(self.label or "simulating", total=None)
                while not self.stop.wait(0.2):
                    if self.label:
                        continue
                    n = sum(len(t.instructions) for t in list(harness.ACTIVE_TRACES))
                    prog.update(task, description=f"simulating: {n:,} instructions")
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread:
            self.thread.join()
        return False


def run(args) -> int:
    from ..nki.harness import Kernel, as_kernel
    from ..options import Options
    from ..timing import estimate_run
    opts = Options.from_env(**({"target": args.target} if args.target else {}),
                            **({"hardware_file": args.hardware} if args.hardware else {}),
                            **({"fast_forward": args.fast_forward} if args.fast_forward else {}),
                            timing_only=bool(args.timing_only))
    obj = load_kernel(args.target_spec)
    if isinstance(obj, Kernel):
        k = obj
    elif hasattr(obj, "_trnsim_kernel"):
        k = obj._trnsim_kernel
    else:
        k = as_kernel(obj, api=args.api or "legacy")
    if args.grid:
        k = k[tuple(int(x) for x in args.grid.split(","))]
    if args.lnc:
        k = k._replace(lnc=int(args.lnc))
    inputs = make_inputs(args.arg, args.seed, not args.timing_only)
    if args.inputs:
        with np.load(args.inputs) as f:
            for name in f.files:
                inputs[name] = f[name]
    params = list(inspect.signature(k.fn).parameters)
    pos, kw = [], {}
    for name, v in inputs.items():
        if name in params:
            kw[name] = v
        else:
            pos.append(v)
    t0 = time.perf_counter()
    with _Progress(not args.json):
        res = k.run(*pos, options=opts, **kw)
        est = estimate_run(res)
    est.sim_seconds = time.perf_counter() - t0
    trace_note = ""
    if args.trace:
        from ..profile.perfetto import shown, write_perfetto
        with _Progress(not args.json, "writing the trace"):
            write_perfetto(est, args.trace, args.trace_limit)
        n = shown(est, args.trace_limit)
        if n is not None:
            trace_note = f" (first {n:,} instructions per core; --trace-limit 0 writes all)"
    if args.html:
        from ..profile.html import write_html
        with _Progress(not args.json, "writing the HTML report"):
            write_html(est, args.html)
    if args.parquet:
        from ..profile.parquet import write_parquet
        with _Progress(not args.json, "writing Parquet tables"):
            write_parquet(est, args.parquet)
    s = est.summary()
    if args.json:
        from .output import print_json
        print_json(s)
        return 0
    from .output import console, table
    rows = [("latency", f"{s['latency_us']:,.3f} us"), ("instructions", f"{s['instructions']:,}"),
            ("HFU (hardware FLOPs utilization)", f"{100 * s['hfu']:.2f} %"),
            ("HBM bytes", f"{s['hbm_bytes']:,}"), ("HBM bandwidth", f"{s['hbm_gbps']:.1f} GB/s"),
            ("PE throttled", f"{s['pe_throttled_us']} us"),
            ("SBUF peak per partition", f"{s['sbuf_peak_bytes_per_partition'] / 1024:.1f} KiB"
             + (f" (spills {s['sbuf_spill_bytes_per_partition'] / 1024:.1f} KiB, not timed)"
                if s["sbuf_spill_bytes_per_partition"] else "")),
            ("trnsim wall time", f"{est.sim_seconds:.2f} s")]
    con = console()
    con.print(table(f"{s['kernel']} on {s['target']}", ["figure", "value"], rows))
    eng = [(k_, f"{100 * v:.1f} %") for k_, v in s["engines"].items() if not k_.startswith("DMA:q")]
    qs = [v for k_, v in s["engines"].items() if k_.startswith("DMA:q")]
    if qs:
        eng.append(("DMA queues (min / max)", f"{100 * min(qs):.1f} % / {100 * max(qs):.1f} %"))
    con.print(table("engine busy share", ["engine", "busy"], eng))
    con.print(f"[bold]{s['bottleneck']}[/]")
    for p in (args.trace, args.html, args.parquet):
        if p:
            con.print(f"wrote {p}" + (trace_note if p is args.trace else ""))
    return 0
