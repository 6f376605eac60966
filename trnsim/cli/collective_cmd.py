"""``trnsim collective OP --system S --size N``: time a collective on a simulated fabric."""
from __future__ import annotations

from rich.markup import escape

from .output import console, print_json, table


def register(sub) -> None:
    """Add ``trnsim collective`` to the command line."""
    p = sub.add_parser("collective", help="time a collective (all-reduce, all-to-all, ...) on a fabric",
                       description="Simulate one collective on an instance, UltraServer or UltraCluster "
                                   "(flow-level network model, the Neuron runtime's choices and costs; ranks are "
                                   "NeuronCores as in nccom-test), or on a GPU system (NVLink domains and the "
                                   "network between them, NCCL's cost model; ranks are GPUs).")
    p.add_argument("op", metavar="OP", help="all-reduce | all-gather | reduce-scatter | all-to-all | "
                   "send-recv | broadcast")
    p.add_argument("--system", default="trn2.48xlarge", help="instance, UltraServer or chip "
                   "or GPU system such as p5.48xlarge (trnsim hw list); default trn2.48xlarge")
    p.add_argument("--size", default="1GiB", help="buffer size as nccl-tests counts it: bytes or "
                   "KiB/MiB/GiB (default 1GiB)")
    p.add_argument("--sweep", metavar="MIN:MAX[:F]", help="sizes MIN..MAX by factor F (default 2), "
                   "e.g. 8B:1GiB")
    p.add_argument("--instances", type=int, default=1, help="instances / UltraServers joined by EFA")
    p.add_argument("--ranks", type=int, default=None, help="ranks (cores) in all, split evenly over "
                   "instances (default: every core)")
    p.add_argument("--lnc", type=int, default=None, help="logical NeuronCore size 1 or 2 (default: the "
                   "runtime's, 2 on Trn2/Trn3)")
    p.add_argument("--algorithm", default=None, help="runtime (default: the runtime's class by size), auto "
                   "(fastest of all), ring, dual-ring, rdh, direct, pairwise, torus-rings, hierarchical, "
                   "hierarchical-rdh; on GPU systems ring, tree, nvls (or ring/LL, ...)")
    p.add_argument("--standalone", action="store_true", help="the collective launched on its own, as nccom-test "
                   "runs it (launch and per-message costs); default: inside a compiled graph, as a model's run")
    p.add_argument("--compare", metavar="SYSTEM", help="a second system, side by side")
    p.add_argument("--dtype", default="fp32", help="data type for the count column (default fp32)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML plot of the sweep")
    p.add_argument("--hardware", metavar="FILE", help="TOML merged over the built-in hardware data")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Simulate, then print a table (or JSON), and write the HTML plot if asked."""
    from ..fabric import parse_size, parse_sweep
    from ..fabric.plot import write_sweep_html
    from ..fabric.report import compare, dtype_bytes, sweep
    sizes = parse_sweep(args.sweep) if args.sweep else [parse_size(args.size)]
    elem = dtype_bytes(args.dtype)
    systems = [args.system] + ([args.compare] if args.compare else [])
    runs = {}
    with _Bar(not args.json and (len(sizes) * len(systems) > 4), len(sizes) * len(systems)) as bar:
        for s in systems:
            runs[s] = sweep(s, args.op, sizes, args.ranks, args.instances, args.algorithm, args.lnc,
                            args.hardware, progress=bar.advance, in_graph=not args.standalone)
    if args.html:
        title = f"{runs[args.system][0].op} on " + " vs ".join(systems)
        write_sweep_html(runs, args.html, title)
    ratio = compare(runs[args.system], runs[args.compare]) if args.compare else None
    if args.json:
        data = {s: [r.to_dict() for r in rs] for s, rs in runs.items()}
        if len(sizes) == 1 and not args.compare:
            out = data[args.system][0]
        else:
            out = {"runs": data}
        if ratio is not None:
            out["compare"] = ratio
        print_json(out)
        return 0
    _print(args, runs, ratio, elem)
    return 0


def _print(args, runs, ratio, elem: int) -> None:
    from ..fabric.gpu import gpu_system_key
    con = console()
    for s, rs in runs.items():
        r0 = rs[0]
        where = (f"{r0.ranks} GPUs" if gpu_system_key(s, args.hardware) is not None
                 else f"{r0.ranks} ranks on {r0.chips} chips (LNC={r0.lnc})")
        title = (f"{r0.op} on {r0.instances} x {s}: {where}"
                 + (" [simulated hierarchically]" if any(r.folded for r in rs) else ""))
        rows = [(f"{r.size_bytes:.0f}", f"{r.size_bytes / elem:.0f}", args.dtype, f"{r.time_us:.2f}",
                 f"{r.algbw_gbps:.3f}", f"{r.busbw_gbps:.3f}", r.algorithm,
                 f"{r.busiest_link} ({100 * r.busiest_link_utilization:.0f}%)") for r in rs]
        con.print(table(escape(title), ["size (B)", "count", "type", "time (us)", "algbw (GB/s)",
                                        "busbw (GB/s)", "algorithm", "busiest link (busy share)"], rows))
        for r in rs[:1]:
            if r.folded:
                con.print(f"  {escape(r.folded)}")
    if ratio:
        con.print(table(f"{args.compare} time / {args.system} time",
                        ["size (B)", f"{args.system} (us)", f"{args.compare} (us)", "ratio"],
                        [(f"{x['size_bytes']:.0f}", f"{x['time_us_a']:.2f}", f"{x['time_us_b']:.2f}",
                          f"{x['ratio_b_over_a']:.2f}x") for x in ratio]))
    if args.html:
        con.print(f"wrote {escape(args.html)}")


class _Bar:
    """A rich progress bar on stderr over the sizes of a sweep (off for one size or --json)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.prog, self.task = enabled, total, None, None

    def __enter__(self):
        """Start the bar when enabled."""
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress
            self.prog = Progress(console=Console(stderr=True), transient=True)
            self.prog.start()
            self.task = self.prog.add_task("simulating", total=self.total)
        return self

    def advance(self, _result=None) -> None:
        """One collective done."""
        if self.prog:
            self.prog.advance(self.task)

    def __exit__(self, *exc):
        """Stop and erase the bar."""
        if self.prog:
            self.prog.stop()
        return False

