"""``trnsim kernel FILE::FUNC --arg a=4096x8192:bf16 ...``: run a kernel on the simulated NeuronCore,
time it, print the summary (or --json) and write Perfetto / HTML / Parquet profiles."""
from __future__ import annotations

import time

from ..validate import SHAPE_HELP
from .output import Spinner


def register(sub) -> None:
    """Add ``trnsim kernel`` to the command line."""
    p = sub.add_parser("kernel", help="run an NKI kernel, estimate its latency and profile it",
                       description="Run FILE::FUNC on a simulated NeuronCore and report estimated "
                       "latency, per-engine busy shares, HFU, HBM traffic and the bottleneck.")
    p.add_argument("target_spec", metavar="FILE::FUNC", help="kernel file and function name")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                   help=SHAPE_HELP.replace("%", "%%"))
    p.add_argument("--inputs", metavar="FILE.npz", help="real inputs by parameter name")
    p.add_argument("--target", default=None, help="trn1 | trn2 | trn3, or a target of the --hardware "
                   "file (default: $TRNSIM_TARGET or trn2)")
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


def check_args(args):
    """Everything the command line names, checked before the kernel runs: options, launch
    (grid, LNC against the target), output paths.  Returns (Options, grid)."""
    from ..errors import LaunchError
    from ..hardware import load_catalog
    from ..options import Options
    from ..validate import check_output_path, parse_grid, positive_int
    opts = Options.from_env(**({"target": args.target} if args.target else {}),
                            **({"hardware_file": args.hardware} if args.hardware else {}),
                            **({"fast_forward": args.fast_forward} if args.fast_forward else {}),
                            timing_only=bool(args.timing_only))
    grid = parse_grid(args.grid) if args.grid is not None else None
    if args.lnc is not None:
        lnc = positive_int(args.lnc, "--lnc")
        core = load_catalog(opts.hardware_file).core_for(opts.target)
        if lnc not in core.lnc:
            raise LaunchError(f"LNC={lnc} is not available on {core.name} ({opts.target})",
                              rule="lnc-generation", limit=list(core.lnc), value=lnc,
                              where=f"--lnc {args.lnc}" + (f" --target {args.target}" if args.target else ""))
    if args.seed < 0:
        from ..errors import ConfigError
        raise ConfigError("--seed must be 0 or positive", rule="option-value", limit=">= 0", value=args.seed,
                          where=f"--seed {args.seed}")
    if args.trace_limit is not None and args.trace_limit < 0:
        from ..errors import ConfigError
        raise ConfigError("--trace-limit must be 0 (all) or positive", rule="option-value", limit=">= 0",
                          value=args.trace_limit, where=f"--trace-limit {args.trace_limit}")
    for path, opt, folder in ((args.trace, "--trace", False), (args.html, "--html", False),
                              (args.parquet, "--parquet", True)):
        if path:
            check_output_path(path, opt, directory=folder)
    return opts, grid


def run(args) -> int:
    """Run, time and profile FILE::FUNC as the command line asks; print the summary."""
    from .. import api
    opts, grid = check_args(args)
    k = api.kernel_of(api.load_kernel(args.target_spec), api=args.api, grid=grid, lnc=args.lnc)
    inputs = api.make_inputs(args.arg, args.seed, not args.timing_only, npz=args.inputs,
                             target=opts.target, hardware=opts.hardware_file)
    pos, kw = api.bind_inputs(k, inputs)
    t0 = time.perf_counter()
    with Spinner(not args.json):
        est = api.time_kernel(k, *pos, options=opts, **kw)
    est.sim_seconds = time.perf_counter() - t0
    trace_note = ""
    if args.trace:
        from ..profile.perfetto import shown, write_perfetto
        with Spinner(not args.json, "writing the trace"):
            write_perfetto(est, args.trace, args.trace_limit)
        n = shown(est, args.trace_limit)
        if n is not None:
            trace_note = f" (first {n:,} instructions per core; --trace-limit 0 writes all)"
    if args.html:
        from ..profile.html import write_html
        with Spinner(not args.json, "writing the HTML report"):
            write_html(est, args.html)
    if args.parquet:
        from ..profile.parquet import write_parquet
        with Spinner(not args.json, "writing Parquet tables"):
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
