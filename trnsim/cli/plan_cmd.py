"""``trnsim plan``: search parallel layouts of a training run and print the best ten (thin layer over
``trnsim.plan.plan``; prices and power for --objective cost|energy come from ``trnsim.cost``)."""
from __future__ import annotations

from typing import List

from ..errors import ConfigError
from ..model.comm import COMM_MODELS
from .output import console, print_json, table


def register(subparsers) -> None:
    """Add ``plan`` to the ``trnsim`` command line."""
    p = subparsers.add_parser("plan", help="search TP/PP/DP/EP/CP/ZeRO/micro-batch/recompute/LNC layouts",
                              description="Enumerate the parallel layouts of a training run, drop those that "
                              "break a rule or do not fit (counted per rule), estimate the rest and rank them.")
    p.add_argument("--model", required=True, help="zoo name (trnsim models) or a config.json path")
    p.add_argument("--system", "--instance", dest="system", required=True,
                   help="instance or UltraServer (trnsim hw list)")
    p.add_argument("--count", "--nodes", dest="count", default="1",
                   help="instances / UltraServers: N, or a list N,M,... to let the planner choose")
    p.add_argument("--seq", type=int, default=2048, help="sequence length")
    p.add_argument("--global-batch", type=int, default=None, help="sequences per step")
    p.add_argument("--batch-tokens", type=float, default=None,
                   help="tokens per step instead of --global-batch: each layout rounds them up to whole "
                   "dp x micro-batch rounds and is ranked per token")
    p.add_argument("--precision", default="bf16", help="matmul format: bf16|fp8|mxfp8|mxfp4")
    p.add_argument("--sparsity", default=None, help="M:N structured sparsity, e.g. 4:16 (trn2/trn3)")
    p.add_argument("--objective", default="time", help="rank by time (s/step), cost (USD/step) or energy (J/step)")
    p.add_argument("--top", type=int, default=10, help="configurations to print")
    p.add_argument("--backend", default="local", help="local (process pool) or ray (needs trnsim[ray])")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: the CPU cores)")
    p.add_argument("--space", action="append", default=[], metavar="NAME=V[,V...]",
                   help="override a search-space dimension (repeatable): tp_max (0 = one instance), pp_max, "
                   "ep_max (0 = no cap), a list for cp, vp, sp, zero, micro_batch, recompute, lnc, or "
                   "recompute_first_fit=true (estimate only each layout's least recompute that fits); "
                   "e.g. micro_batch=1,2 (defaults: trnsim/plan/data/space.toml)")
    p.add_argument("--comm", default=None, choices=COMM_MODELS,
                   help="collectives model (default: the one the estimator's calibration was fitted with)")
    p.add_argument("--costs", default="roofline", choices=("roofline", "simulated"),
                   help="per-op costs: catalog roofline, or simulated reference kernels (cached)")
    p.add_argument("--price", action="append", default=[], metavar="SYSTEM=USD",
                   help="hourly price of one instance (for --objective cost)")
    p.add_argument("--prices", action="append", default=[], metavar="FILE", help="TOML/CSV of prices")
    p.add_argument("--price-kind", default="on-demand", help="on-demand|capacity-block|reserved|spot")
    p.add_argument("--pue", type=float, default=None, help="power usage effectiveness (for --objective energy)")
    p.add_argument("--out", metavar="FILE.parquet", help="write every evaluated configuration (needs pyarrow)")
    p.add_argument("--framework", default=None, help="memory layout: nxd (Trainium default), optimum-neuron, "
                   "megatron (GPU default), fsdp, deepspeed")
    p.add_argument("--lora-rank", type=int, default=None, help="plan a LoRA fine-tune: adapter rank (frozen base)")
    p.add_argument("--lora-targets", default=None, help="LoRA projections (default q,k,v,o)")
    p.add_argument("--hardware", metavar="FILE", help="TOML merged over the hardware catalog")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plan)


def parse_counts(text: str) -> List[int]:
    """``"4"`` or ``"1,2,4"`` -> a list of instance counts."""
    try:
        out = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise ConfigError(f"--count takes positive integers N or N,M,..., got {text!r}", rule="plan-count",
                          limit=">= 1", value=text)
    return out


class _Bar:
    """A rich progress bar on stderr fed by the planner's (done, total, label) callback."""

    def __init__(self, enabled: bool):
        self.enabled, self.prog, self.task = enabled, None, None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), transient=True, console=Console(stderr=True))
            self.prog.start()
        return self

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.prog is None:
            return
        if self.task is None:
            self.task = self.prog.add_task(label, total=total)
        self.prog.update(self.task, completed=done, total=total, description=label)

    def __exit__(self, *exc):
        if self.prog is not None:
            self.prog.stop()
        return False


def cmd_plan(args) -> int:
    """Run the planner and print the drop table and the best configurations."""
    from .. import api
    from ..plan import check_parquet_target, parse_space_args, write_parquet
    if args.out:
        check_parquet_target(args.out)
    prices = None
    if args.objective == "cost":
        from ..compare.options import make_prices
        prices = make_prices(args.price_kind, args.price, args.prices)
    with _Bar(not args.json) as bar:
        r = api.plan(args.model, args.system, costs=args.costs, objective=args.objective, prices=prices,
                     pue=args.pue, count=parse_counts(args.count), seq=args.seq, global_batch=args.global_batch,
                     batch_tokens=args.batch_tokens, precision=args.precision, top=args.top,
                     backend=args.backend, workers=args.workers, progress=bar, sparsity=args.sparsity,
                     comm=args.comm, hardware_file=args.hardware, space=parse_space_args(args.space),
                     keep_rows=bool(args.out), framework=args.framework, lora_rank=args.lora_rank,
                     lora_targets=args.lora_targets)
    written = write_parquet(r, args.out) if args.out else None
    if args.json:
        d = r.to_dict()
        if args.out:
            d["out"] = dict(path=args.out, rows=written)
        print_json(d)
        return 0
    out = console()
    counts = "/".join(map(str, r.counts))
    out.print(table(f"Why configurations were dropped ({r.enumerated:,} enumerated, {r.estimated:,} estimated)",
                    ["rule", "dropped", "example", "why"],
                    [(d.rule, f"{d.count:,}", d.example, d.reason) for d in r.dropped]
                    + [("(kept and estimated)", f"{r.estimated:,}", "", "")]))
    timed = r.objective == "time"
    score_col = {"time": [], "cost": ["USD/step"], "energy": ["kJ/step"]}[r.objective]
    own = not r.global_batch   # batch_tokens: each layout's own global batch, shown
    scale = 1e-3 if r.objective == "energy" else 1.0
    rows = [(b.rank, b.label, *([] if timed else [f"{b.score * scale:,.4g}"]),
             *([f"{b.global_batch:,}"] if own else []), f"{b.step_time_s:.3f}", f"{b.tokens_per_s:,.0f}", f"{b.mfu:.1%}",
             f"{b.memory_per_core_gib:.1f}/{b.hbm_per_core_gib:.0f}", f"{b.comm_exposed_s:.3f}", f"{b.bubble_s:.3f}")
            for b in r.best]
    batch = f"global batch {r.global_batch}" if r.global_batch else f"{r.batch_tokens:,.0f} tokens per step"
    out.print(table(f"Best {len(r.best)} layouts of {r.model} on {counts} x {r.system} (seq {r.seq}, {batch}, "
                    f"{r.precision}), ranked by {r.objective}",
                    ["#", "layout", *score_col, *(["global batch"] if own else []), "step (s)", "tokens/s", "MFU", "GiB/core", "comm exp. (s)",
                     "bubble (s)"], rows))
    out.print(f"{r.enumerated:,} configurations in {r.wall_s:.2f} s ({r.configs_per_s:,.0f}/s; "
              f"{r.memory_checked:,} memory-checked at {r.evaluated_per_s:,.0f}/s) on {r.backend} x {r.workers}")
    for n in r.notes:
        out.print(f"note: {n}")
    if args.out:
        out.print(f"wrote {written:,} rows to {args.out}")
    return 0
