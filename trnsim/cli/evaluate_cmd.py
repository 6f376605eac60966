"""``trnsim evaluate FILE.py:Class`` / ``trnsim evaluate --example``: the three-step evaluation of a model
(compatibility, benchmark comparison, engineering cost and break-even) in one report."""
from __future__ import annotations

from rich.markup import escape

from .compare_cmd import Progress, add_workload_args, print_comparison, write_reports
from .output import console, print_json, table


def register(sub) -> None:
    """Add ``trnsim evaluate`` to the command line."""
    p = sub.add_parser("evaluate", help="three-step evaluation of your model: compatibility, cost "
                       "comparison, engineering cost and break-even",
                       description="Capture FILE.py:CLASS (torch extra) on the meta device, report its "
                       "compatibility, estimate its training on each system, price it, and add the porting "
                       "and migration cost over 12 months with the break-even in tokens. --example runs a "
                       "built-in model offline and writes evaluation.html.")
    p.add_argument("model", nargs="?", metavar="FILE.py:CLASS", help="model file and nn.Module class")
    p.add_argument("--example", action="store_true", help="the built-in example model (TinyGPT)")
    p.add_argument("--input-shape", default=None, metavar="SHAPE",
                   help="one example batch of token ids, e.g. 4x1024 (default 4x1024)")
    p.add_argument("--kwargs", nargs="*", default=[], metavar="KEY=VALUE", help="constructor arguments")
    p.add_argument("--eng-rate", type=float, default=None, help="your engineering USD per hour (default "
                   "compare/data/engineering.toml)")
    p.add_argument("--effort", action="append", default=[], metavar="KEY=VALUE",
                   help="override an engineering figure, e.g. effort.custom_kernel=120 compile.minutes=10")
    p.add_argument("--egress-gb", type=float, default=None, help="GB of data moved to a new system "
                   "(default: the tokenized dataset)")
    add_workload_args(p)
    p.set_defaults(func=run)


def _engineering(args) -> dict:
    from ..errors import ConfigError
    out = {}
    if args.eng_rate is not None:
        out["rate.usd_per_hour"] = args.eng_rate
    for it in args.effort:
        k, sep, v = it.partition("=")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            sep = ""
        if not sep:
            raise ConfigError(f"--effort takes KEY=NUMBER, got {it!r}", rule="engineering",
                              limit="KEY=NUMBER", value=it)
    return out


def run(args) -> int:
    """Evaluate, print the tables (or JSON), write the reports (``--example`` writes evaluation.html)."""
    from ..compare import parse_delays, parse_systems
    from ..compare.evaluate import evaluate, evaluate_example
    from ..compare.options import make_power, make_prices, make_workload
    from ..errors import ConfigError
    from ..frontends.torch.loader import parse_kwargs, parse_shape
    from ..report.evaluation import html_sections, markdown_sections
    if not args.example and not args.model:
        raise ConfigError("name a model (FILE.py:CLASS) or pass --example", rule="evaluate-model",
                          value=None, hint="trnsim evaluate --example")
    eng = _engineering(args)
    prices = make_prices(args.price_kind, args.price, args.prices)
    with Progress(not args.json, 7) as bar:
        if args.example:
            if not (args.html or args.md or args.csv):
                args.html = "evaluation.html"
            refs = parse_systems(args.systems, "train") if args.systems else ()
            ev = evaluate_example(args.tokens or 2e11, prices, make_power(args.pue), refs,
                                  args.baseline or "p5.48xlarge", eng, progress=bar.step)
        else:
            w = make_workload(args.model, args.task, args.tokens, args.seq, args.batch_tokens, args.deadline_days,
                              args.max_instances, args.precision, lora_rank=args.lora_rank,
                              lora_targets=args.lora_targets, framework=args.framework,
                              runs_per_month=args.runs_per_month)
            refs = parse_systems(args.systems, "train")
            base = args.baseline or next((r.key for r in refs if r.key == "p5.48xlarge"), refs[0].key)
            shape = parse_shape(args.input_shape or "4x1024")
            ev = evaluate(args.model, [shape], w, refs, prices, make_power(args.pue), base, eng, args.egress_gb,
                          parse_kwargs(args.kwargs), parse_delays(args.start_delay), progress=bar.step)
    d = ev.to_dict()
    title = f"trnsim evaluate: {d['workload']['model']}"
    written = write_reports(d, args, title, html_sections(d), markdown_sections(d))
    if args.json:
        print_json({**d, "written": written})
        return 0
    # the steps in the order buyers are told to take them: compatibility, comparison, engineering cost
    _print_step1(d)
    print_comparison(d)
    _print_step3(d)
    for p in written:
        console().print(f"wrote {escape(p)}")
    return 0


def _print_step1(d: dict) -> None:
    con = console()
    c = d["evaluation"].get("compatibility")
    if c:
        con.print(f"[bold]Step 1[/] compatibility: {c['total_ops']} operator calls, "
                  f"{c['documented_pct']:.1f} % on the torch-neuronx list")
    else:
        con.print("[bold]Step 1[/] compatibility: not checked (no capture; see the notes below)")
    con.print("[bold]Step 2[/] benchmark comparison")


def _print_step3(d: dict) -> None:
    from ..report.evaluation import break_even_table
    con = console()
    ev = d["evaluation"]
    cols, rows = break_even_table(ev)
    con.print(table("Step 3: migration cost and break-even", cols, [[escape(str(v)) for v in r] for r in rows]))
    con.print(escape(ev["summary"]))
    for n in ev.get("notes", []):
        con.print(f"note: {escape(n)}")
