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
                       "and migration cost over 12 months with the break-even in tokens. --example answers "
                       "'should these jobs move to Trainium, and what would it save?' for the example jobs "
                       "(a weekly 13B LoRA fine-tune, 70B pre-training, 8B and 70B serving) on trn1/trn2/trn3 "
                       "against p5/p5en/p6-b200, with the published claims tested; --html FILE writes the report.")
    p.add_argument("model", nargs="?", metavar="FILE.py:CLASS", help="model file and nn.Module class")
    p.add_argument("--example", action="store_true", help="the built-in example: a Llama-style module and "
                   "four jobs (compare/data/example_jobs.toml)")
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
    """Evaluate, print the tables (or JSON), write the reports the user asked for."""
    from ..compare import parse_delays, parse_systems
    from ..compare.evaluate import evaluate
    from ..compare.options import make_power, make_prices, make_workload
    from ..errors import ConfigError
    from ..frontends.torch.loader import parse_kwargs, parse_shape
    from ..report.evaluation import html_sections, markdown_sections
    if not args.example and not args.model:
        raise ConfigError("name a model (FILE.py:CLASS) or pass --example", rule="evaluate-model",
                          value=None, hint="trnsim evaluate --example")
    if args.example and args.model:
        raise ConfigError(f"--example evaluates the built-in model, so {args.model} would be ignored",
                          rule="evaluate-model", value=args.model, limit="FILE.py:CLASS or --example, not both",
                          hint=f"trnsim evaluate {args.model}  (or trnsim evaluate --example)")
    from ..validate import check_output_args
    check_output_args(args)   # a bad output path fails before the evaluation, not after it
    eng = _engineering(args)
    prices = make_prices(args.price_kind, args.price, args.prices)
    if args.example:
        return _run_example(args, prices, eng)
    w = make_workload(args.model, args.task, args.tokens, args.seq, args.batch_tokens, args.deadline_days,
                      args.max_instances, args.precision, lora_rank=args.lora_rank, lora_targets=args.lora_targets,
                      framework=args.framework, runs_per_month=args.runs_per_month)
    refs = parse_systems(args.systems, "train")
    base = args.baseline or next((r.key for r in refs if r.key == "p5.48xlarge"), refs[0].key)
    shape = parse_shape(args.input_shape or "4x1024")
    with Progress(not args.json, len(refs) + 1) as bar:
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


def _run_example(args, prices, eng) -> int:
    """``--example``: the decision over the example jobs, the claims, the report where the user asked."""
    from ..compare.claims import load_claims, test_claims
    from ..compare.decision import EXAMPLE_SYSTEMS, example_decision, example_prices_book, load_jobs
    from ..compare.options import make_power
    from ..report.decision_page import claims_table, decision_page, migration_table, verdict_table
    from ..outputs import write_text
    power = make_power(args.pue)
    systems = [s.strip() for s in args.systems.split(",")] if args.systems else EXAMPLE_SYSTEMS
    # one step per job and system, one for the capture, one per claim
    with Progress(not args.json, len(load_jobs()) * len(systems) + 1 + len(load_claims())) as bar:
        dec = example_decision(prices, power, eng, systems, args.baseline or "p5.48xlarge", progress=bar.step)
        # the claims see the same prices as the jobs (the example's derived ones included)
        book, _ = example_prices_book(prices, systems)
        claims = [c.to_dict() for c in test_claims(book, power, progress=bar.step)]
    d = dec.to_dict()
    written = []
    if args.html:
        written.append(write_text(args.html, decision_page(d, claims), "--html"))
    if args.json:
        print_json({**d, "claims": claims, "written": written})
        return 0
    con = console()
    con.print(f"[bold]{escape(d['summary'])}[/]")
    for title, (cols, rows) in (("The answer, job by job", verdict_table(d)),
                                ("Migration cost", migration_table(d)),
                                ("Published claims, tested", claims_table(claims))):
        con.print(table(title, cols, [[escape(str(v)) for v in r] for r in rows]))
    for n in d["notes"]:
        con.print(f"note: {escape(n)}")
    for p in written:
        con.print(f"wrote {escape(p)}")
    if not written:
        con.print("the full report with charts: add --html evaluation.html")
    return 0
