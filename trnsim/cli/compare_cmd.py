"""``trnsim compare``: one workload's time, cost and energy on Trainium and GPU systems."""
from __future__ import annotations

from rich.markup import escape

from ..checks import count_arg
from .output import console, print_json, table


def add_workload_args(p, task_default: str = "train") -> None:
    """Options shared by compare and evaluate: task, size, systems, prices, power, outputs."""
    p.add_argument("--task", choices=("train", "infer", "finetune"), default=task_default,
                   help="train (default), infer, or finetune (LoRA: --lora-rank, --lora-targets)")
    p.add_argument("--tokens", type=count_arg, default=None, help="training tokens (train; required) or output "
                   "tokens to serve (infer; default: 30 days at --rate)")
    p.add_argument("--systems", default=None, help="comma-separated systems (trnsim hw list; GPU systems: "
                   "p5.48xlarge, p5en.48xlarge, p6-b200.48xlarge, p6-b300.48xlarge, gb300-nvl72)")
    p.add_argument("--baseline", default=None, help="system price-performance is relative to (default "
                   "p5.48xlarge when compared, else the first)")
    p.add_argument("--seq", type=int, default=4096, help="training sequence length (default 4096)")
    p.add_argument("--batch-tokens", type=count_arg, default=4 * 1024 * 1024, help="tokens per optimizer step "
                   "(default 4M)")
    p.add_argument("--deadline-days", type=float, default=30.0, help="train within this many days: sets the "
                   "instances needed (default 30)")
    p.add_argument("--max-instances", type=int, default=1024, help="cap on instances per system (default 1024)")
    p.add_argument("--precision", default="bf16", help="bf16 (default) | fp8 | mxfp8 | mxfp4")
    p.add_argument("--lora-rank", type=int, default=16, help="LoRA adapter rank (finetune; default 16)")
    p.add_argument("--lora-targets", default="q,k,v,o", help="LoRA projections (finetune; default q,k,v,o)")
    p.add_argument("--framework", default=None, help="training framework layout (default: nxd on Trainium, "
                   "megatron on GPUs; optimum-neuron, fsdp, deepspeed)")
    p.add_argument("--runs-per-month", type=float, default=0.0, help="repeat the run this often a month: "
                   "adds $ per month (e.g. 4.35 for a weekly fine-tune)")
    p.add_argument("--input", type=int, default=2048, help="prompt tokens per request (infer)")
    p.add_argument("--output", type=int, default=512, help="generated tokens per request (infer)")
    p.add_argument("--rate", type=float, default=10.0, help="requests per second to serve (infer)")
    p.add_argument("--slo-tpot-ms", type=float, default=None, help="time per output token SLO (infer)")
    p.add_argument("--slo-ttft-ms", type=float, default=None, help="time to first token SLO (infer)")
    add_price_args(p)
    p.add_argument("--start-delay", action="append", default=[], metavar="SYSTEM=90d",
                   help="wait for capacity before the run starts (adds to time to result)")
    p.add_argument("--planner", action="store_true", help="training layouts from trnsim plan's whole default "
                   "space instead of compare's slice of it (slower: seconds per system)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument("--md", metavar="FILE", help="write a Markdown export")
    p.add_argument("--csv", metavar="FILE", help="write a CSV export (one row per system)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_price_args(p) -> None:
    """Options shared by every command that prices systems: your prices, their kind, the PUE."""
    p.add_argument("--price", action="append", default=[], metavar="SYSTEM=USD",
                   help="your hourly price of a system (repeatable); wins over published prices")
    p.add_argument("--prices", action="append", default=[], metavar="FILE",
                   help="a TOML or CSV file of your prices (system, usd_per_hour)")
    p.add_argument("--price-kind", default="on-demand",
                   help="on-demand (default) | capacity-block | reserved | spot")
    p.add_argument("--pue", type=float, default=None, help="data-center PUE (default: cost/data/power.toml)")


def register(sub) -> None:
    """Add ``trnsim compare`` to the command line."""
    p = sub.add_parser("compare", help="time, cost and energy of a workload on Trainium vs GPU systems",
                       description="Estimate a zoo model's training run or serving load on each system with "
                                   "the best configuration found, then price it (your prices win), add energy "
                                   "with a PUE, and show how the ranking moves with +-25 % on price, "
                                   "utilization and power.")
    p.add_argument("--model", required=True, help="a zoo model (trnsim models) or a Hugging Face config.json")
    add_workload_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Compare, then print the table (or JSON) and write the reports asked for."""
    from .. import api
    from ..compare import parse_delays, parse_systems
    from ..compare.options import make_prices
    from ..validate import check_output_args
    check_output_args(args)   # a bad output path fails before the comparison, not after it
    systems = [r.key for r in parse_systems(args.systems, args.task)]
    with Progress(not args.json, len(systems)) as bar:
        c = api.compare(args.model, systems, args.task, make_prices(args.price_kind, args.price, args.prices),
                        args.pue, args.baseline, parse_delays(args.start_delay), full_search=args.planner,
                        progress=bar.step, tokens=args.tokens, seq=args.seq, batch_tokens=args.batch_tokens,
                        deadline_days=args.deadline_days, max_instances=args.max_instances,
                        precision=args.precision, input_len=args.input, output_len=args.output, rate=args.rate,
                        slo_tpot_ms=args.slo_tpot_ms, slo_ttft_ms=args.slo_ttft_ms, lora_rank=args.lora_rank,
                        lora_targets=args.lora_targets, framework=args.framework,
                        runs_per_month=args.runs_per_month)
    d = c.to_dict()
    written = write_reports(d, args, "trnsim compare: " + str(args.model))
    if args.json:
        print_json({**d, "written": written})
        return 0
    print_comparison(d, written)
    return 0


def write_reports(d: dict, args, title: str, sections=((), ()), md_sections=((), ())) -> list:
    """Write --html / --md / --csv; returns the paths written.  ``sections`` / ``md_sections``: fragments
    (before, after) the compare tables (an evaluation's steps 1 and 3)."""
    from ..report import write_csv, write_html, write_markdown
    out = []
    if args.html:
        out.append(write_html(d, args.html, title, list(sections[0]), list(sections[1])))
    if args.md:
        out.append(write_markdown(d, args.md, title, list(md_sections[0]), list(md_sections[1])))
    if args.csv:
        out.append(write_csv(d, args.csv))
    return out


def print_comparison(d: dict, written=()) -> None:
    """The report's tables and its summary on the terminal."""
    from ..report.tables import all_tables
    con = console()
    for _, title, (cols, rows) in all_tables(d):
        if rows:
            con.print(table(escape(title), cols, [[escape(str(v)) for v in r] for r in rows]))
    con.print(escape(d["summary"]))
    for p in written:
        con.print(f"wrote {escape(p)}")


class Progress:
    """A rich progress bar on stderr, one step per system (off under --json)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.prog, self.task = enabled, total, None, None

    def __enter__(self):
        """Start the bar when enabled."""
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress as _P
            self.prog = _P(console=Console(stderr=True), transient=True)
            self.prog.start()
            self.task = self.prog.add_task("estimating", total=self.total)
        return self

    def step(self, name: str = "") -> None:
        """One system started."""
        if self.prog:
            self.prog.update(self.task, description=f"estimating {name}")
            self.prog.advance(self.task)

    def __exit__(self, *exc):
        """Stop and erase the bar."""
        if self.prog:
            self.prog.stop()
        return False
