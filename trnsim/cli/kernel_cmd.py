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
                   "file (default: $TRNSIM_TARGET or trn2); several, comma-separated "
                   "(trn1,trn2,trn3), print the figures side by side")
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
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help="rows of the hotspot, opcode and stall tables (default 10; --json: 20)")
    p.add_argument("--detail", action="store_true",
                   help="also show the longest stalls, DMA transfers, the critical path and memory peaks")
    p.add_argument("--save", metavar="FILE.json",
                   help="write the summary and profile as JSON (what `trnsim diff` compares)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop the run with an error after this many seconds of wall time (default: none)")
    p.add_argument("--json", action="store_true", help="print the summary and the profile as JSON")
    p.set_defaults(func=run)


def check_args(args):
    """Everything the command line names, checked before the kernel runs: options, launch
    (grid, LNC against the target), output paths.  Returns (Options, grid)."""
    from ..errors import LaunchError
    from ..hardware import load_catalog
    from ..options import Options
    from ..validate import check_output_path, parse_grid, positive_int
    targets = parse_targets(args.target)
    opts = Options.from_env(**({"target": targets[0]} if targets else {}),
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
    if args.top is not None and args.top < 1:
        from ..errors import ConfigError
        raise ConfigError("--top must be 1 or more", rule="option-value", limit=">= 1",
                          value=args.top, where=f"--top {args.top}")
    if len(targets) > 1:
        from ..errors import ConfigError
        from ..options import canonical_target
        for t in targets[1:]:
            canonical_target(t, opts.hardware_file)  # an unknown one fails before any run
        for path, opt in ((args.trace, "--trace"), (args.html, "--html"),
                          (args.parquet, "--parquet")):
            if path:
                raise ConfigError(f"{opt} writes one run's profile; --target names {len(targets)}",
                                  rule="targets-outputs", limit="one target with " + opt,
                                  value=args.target, where=f"--target {args.target}",
                                  hint="run once per target to write each profile")
    for path, opt, folder in ((args.trace, "--trace", False), (args.html, "--html", False),
                              (args.parquet, "--parquet", True), (args.save, "--save", False)):
        if path:
            check_output_path(path, opt, directory=folder)
    return opts, grid


def parse_targets(text):
    """``--target a,b,c`` as a list (empty when not given); an empty name is an error."""
    if text is None:
        return []
    names = [t.strip() for t in str(text).split(",")]
    if not all(names):
        from ..errors import ConfigError
        raise ConfigError("--target has an empty name", rule="option-value",
                          limit="comma-separated target names", value=text,
                          where=f"--target {text}", hint="e.g. --target trn1,trn2,trn3")
    return names


def run(args) -> int:
    """Run, time and profile FILE::FUNC as the command line asks; print the summary."""
    from .. import api
    opts, grid = check_args(args)
    targets = parse_targets(args.target)
    k = api.kernel_of(api.load_kernel(args.target_spec), api=args.api, grid=grid, lnc=args.lnc)
    inputs = api.make_inputs(args.arg, args.seed, not args.timing_only, npz=args.inputs,
                             target=opts.target, hardware=opts.hardware_file)
    pos, kw = api.bind_inputs(k, inputs)
    from ..lifetime import time_limit
    if len(targets) > 1:
        with time_limit(args.timeout, f"kernel {args.target_spec}"):
            return _run_targets(args, api, k, pos, kw, opts, targets)
    t0 = time.perf_counter()
    with Spinner(not args.json), time_limit(args.timeout, f"kernel {args.target_spec}"):
        est = api.time_kernel(k, *pos, options=opts, **kw)
    est.sim_seconds = time.perf_counter() - t0
    fig = est.figures()
    # one analysis for the terminal, --json and the renderers (the HTML wants 20 rows at least)
    top = args.top if args.top is not None and args.json else max(_top(args), 20)
    with Spinner(not args.json, "analysing the profile"):
        prof = api.profile(est, top=top, figures=fig)
    s = api.summarize(est, analysis=prof, figures=fig)
    trace_note = ""
    if args.trace:
        from ..profile.perfetto import shown, write_perfetto
        with Spinner(not args.json, "writing the trace"):
            write_perfetto(est, args.trace, args.trace_limit, analysis=prof, summary=s)
        n = shown(est, args.trace_limit)
        if n is not None:
            trace_note = f" (first {n:,} instructions per core; --trace-limit 0 writes all)"
    if args.html:
        from ..profile.html import write_html
        with Spinner(not args.json, "writing the HTML report"):
            write_html(est, args.html, analysis=prof, summary=s)
    if args.parquet:
        from ..profile.parquet import write_parquet
        with Spinner(not args.json, "writing Parquet tables"):
            write_parquet(est, args.parquet)
    doc = {**s.to_dict(), "profile": prof}
    if args.save:
        _save(args.save, doc)
    if args.json:
        from .output import print_json
        print_json(doc)
        return 0
    _print_summary(args, est, s, prof)
    for p in (args.trace, args.html, args.parquet, args.save):
        if p:
            con_print(f"wrote {p}" + (trace_note if p is args.trace else ""))
    return 0


def _top(args) -> int:
    """Rows per table: --top, else 10 on the terminal and 20 in JSON."""
    return args.top if args.top is not None else (20 if args.json or args.save else 10)


def _save(path, doc) -> None:
    from ..outputs import dumps_strict, write_text
    from .output import _default
    write_text(path, dumps_strict(doc, default=_default), "--save")


def con_print(text: str) -> None:
    """Print one line on the rich console."""
    from .output import console
    console().print(text)


def _print_summary(args, est, s, prof) -> None:
    from . import kernel_view as kv
    from .output import console, table
    f = s.figures
    rows = [("latency", f"{f.latency_us:,.3f} us"), ("instructions", f"{f.instructions:,}"),
            ("HFU (hardware FLOPs utilization)", f"{100 * f.hfu:.2f} %"),
            ("HBM bytes", f"{f.hbm_bytes:,}"), ("HBM bandwidth", f"{f.hbm_gbps:.1f} GB/s"),
            *kv.speed_rows(prof["speed_of_light"]),
            ("PE throttled", f"{f.pe_throttled_us} us"),
            ("SBUF peak per partition", f"{f.sbuf_peak_bytes_per_partition / 1024:.1f} KiB"
             + (f" (over capacity by {f.sbuf_spill_bytes_per_partition / 1024:.1f} KiB)"
                if f.sbuf_spill_bytes_per_partition else "")),
            *([("SBUF spills", f"{f.sbuf_spill_dmas:,} DMAs, "
                f"{f.sbuf_spill_traffic_bytes / 2**20:,.1f} MiB, timed as DMAs "
                f"({f.sbuf_spill_cause})")] if f.sbuf_spill_dmas else []),
            ("trnsim wall time", f"{est.sim_seconds:.2f} s")]
    con = console()
    con.print(table(f"{f.kernel} on {f.target}", ["figure", "value"], rows))
    con.print(table(f"engine busy share (core {prof['core']})",
                    ["engine", "busy", "idle time waits on (share of the run)"],
                    kv.engine_rows(f.engines, prof)))
    top = args.top or 10
    con.print(kv.hotspot_table(prof, top))
    con.print(kv.opcode_table(prof, top))
    con.print(kv.dma_line(prof))
    if args.detail:
        for t in kv.detail_tables(prof, top):
            con.print(t)
    con.print(f"[bold]{s.bottleneck}[/]")


def _run_targets(args, api, k, pos, kw, opts, targets) -> int:
    """--target a,b,c: one run per target, figures side by side (JSON: summary + profile each)."""
    t0 = time.perf_counter()
    with Spinner(not args.json):
        ests = api.compare_targets(k, *pos, targets=targets, options=opts, **kw)
    for e in ests.values():
        e.sim_seconds = (time.perf_counter() - t0) / len(ests)
    with Spinner(not args.json, "analysing the profiles"):
        profs = {t: api.profile(e, top=_top(args)) for t, e in ests.items()}
    cmp = api.compare_figures(ests, profs)
    doc = cmp.to_dict()
    for t, e in ests.items():
        doc["targets"][t]["summary"] = api.summarize(e, analysis=profs[t]).to_dict()
        doc["targets"][t]["profile"] = profs[t]
    if args.save:
        _save(args.save, doc)
    if args.json:
        from .output import print_json
        print_json(doc)
        return 0
    from . import kernel_view as kv
    from .output import console
    con = console()
    con.print(kv.targets_table(cmp))
    for t in ests:
        con.print(f"[bold]{t}[/]: {cmp.targets[t].verdict}")
    if args.save:
        con.print(f"wrote {args.save}")
    return 0
