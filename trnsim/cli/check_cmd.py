"""``trnsim check my_model.py:MyModel --input-shape 1x2048``: compatibility dry run of a PyTorch model
(torch extra): op classes, torch-neuronx coverage, custom / CUDA-only ops and CUDA code, with source lines."""
from __future__ import annotations

from rich.markup import escape

from .output import console, print_json, table


def register(sub) -> None:
    """Add ``trnsim check`` to the command line (torch is imported only when it runs)."""
    p = sub.add_parser("check", help="compatibility dry run of a PyTorch model (needs the torch extra)",
                       description="Build FILE.py:CLASS on the meta device (no weights), capture it with "
                       "torch.export (a dispatch trace when export fails), and report its operators: class, "
                       "count, source lines, whether torch-neuronx documents them and trnsim can cost them; "
                       "ops outside aten and hard-coded CUDA use.")
    p.add_argument("model", metavar="FILE.py:CLASS", help="model file and nn.Module class")
    p.add_argument("--input-shape", action="append", required=True, metavar="SHAPE",
                   help="input shape, e.g. 1x2048 (repeat for several inputs)")
    p.add_argument("--dtype", default="int64", help="input dtype (default int64: token ids)")
    p.add_argument("--model-dtype", default=None, help="cast parameters first, e.g. bfloat16")
    p.add_argument("--kwargs", nargs="*", default=[], metavar="KEY=VALUE",
                   help="constructor arguments as Python literals, e.g. n_layer=12 bias=False")
    p.add_argument("--train", action="store_true", help="capture in training mode (dropout kept)")
    p.add_argument("--capture", choices=("auto", "export", "dispatch"), default="auto",
                   help="auto: torch.export, falling back to a dispatch trace")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the dry run and print the report (table or JSON)."""
    from ..frontends.torch import require_torch
    require_torch()  # before anything else: a missing extra is a one-line error with the install command
    from ..frontends.torch.check import check_model
    from ..frontends.torch.loader import parse_kwargs

    kwargs = parse_kwargs(args.kwargs)
    with _Steps(enabled=not args.json) as step:
        report = check_model(args.model, args.input_shape, args.dtype, kwargs=kwargs,
                             model_dtype=args.model_dtype, train=args.train, capture_with=args.capture,
                             progress=step)
    if args.json:
        print_json(report.to_dict())
    else:
        print_report(report)
    return 0


class _Steps:
    """A transient spinner on stderr naming the current step (capture takes seconds on big models)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.progress = None
        self.task = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
            self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                     transient=True, console=Console(stderr=True))
            self.progress.start()
            self.task = self.progress.add_task("starting", total=None)
        return self

    def __call__(self, message: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=message)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()


def print_report(r) -> None:
    """The report as rich tables: summary, operators, what needs porting, CUDA code."""
    out = console()
    shapes = ", ".join("x".join(map(str, s)) for s in r.input_shapes)
    out.print(f"[bold]{escape(r.model)}[/] input {shapes} ({r.input_dtype}), captured with {r.capture} "
              f"in {r.seconds:.1f} s")
    if r.capture_note:
        out.print(f"[yellow]note:[/] {escape(r.capture_note)}")
    out.print(f"operator calls: {r.total_ops}; on the torch-neuronx documented list: {r.documented_ops} "
              f"([bold]{r.documented_pct:.1f} %[/]); costable by trnsim: {r.costable_ops} "
              f"([bold]{r.costable_pct:.1f} %[/])")
    rows = [(escape(x.op), x.op_class, x.count, _yes(x.documented), _yes(x.costable),
             escape(", ".join(_short(loc) for loc in x.locations))) for x in r.rows]
    out.print(_fold(table("Operators", ["op", "class", "count", "documented", "costable", "source"], rows)))
    need = r.needs_custom_kernel
    if need:
        out.print(_fold(table("Needs a custom kernel or a rewrite", ["op", "why", "count", "source"],
                              [(escape(x.op), _why(x), x.count, escape(", ".join(_short(loc) for loc in x.locations)))
                               for x in need])))
    if r.cuda_findings:
        out.print(_fold(table("Hard-coded CUDA use (full paths in --json)", ["place", "kind", "code"],
                              [(escape(_short(f"{f.file}:{f.line}")), f.kind, escape(f.text))
                               for f in r.cuda_findings])))
    else:
        out.print("no hard-coded CUDA use found in the model source")
    out.print(f"[dim]documented list: {escape(r.supported_source)}[/]")


def _fold(t):
    """Keep operator names and places whole: fold them onto a second line rather than cut them."""
    t.columns[0].overflow = "fold"
    t.columns[-1].overflow = "fold"
    return t


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _why(row) -> str:
    if row.op.startswith("higher_order::"):
        return "data-dependent control flow (torch.cond / while_loop)"
    if row.op_class == "custom":
        return "outside aten (custom extension)"
    if row.cuda_only:
        return "CUDA-only kernel"
    return f"no trnsim cost rule ({row.op_class})"


def _short(loc: str) -> str:
    """``/long/path/model.py:12`` -> ``model.py:12`` for the table (the JSON keeps full paths)."""
    return loc.rsplit("/", 1)[-1]
