"""``trnsim diff a.json b.json``: compare two saved runs of ``trnsim kernel`` (--json or --save):
latency, engine shares and hotspots side by side with deltas."""
from __future__ import annotations


def register(sub) -> None:
    """Add ``trnsim diff`` to the command line."""
    p = sub.add_parser("diff", help="compare two saved kernel runs (trnsim kernel --save / --json)",
                       description="Compare run B against run A: latency, engine busy shares and "
                       "hotspots (per source line and opcode) with deltas B - A.")
    p.add_argument("a", metavar="A.json", help="the baseline run")
    p.add_argument("b", metavar="B.json", help="the run compared with it")
    p.add_argument("--target", default=None,
                   help="the target to take from files saved with --target a,b,c")
    p.add_argument("--top", type=int, default=10, metavar="N", help="hotspot rows (default 10)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def _signed(x: float, unit: str = "", digits: int = 3) -> str:
    return f"{x:+,.{digits}f}{unit}"


def _speed(x) -> str:
    if not x:
        return ""
    return f" (B {x:.2f}x faster)" if x >= 1 else f" (B {1 / x:.2f}x slower)"


def run(args) -> int:
    """Load both runs, compare them, print the tables (or JSON)."""
    from ..errors import ConfigError
    from ..profile.diff import diff_runs, load_run
    if args.top < 1:
        raise ConfigError("--top must be 1 or more", rule="option-value", limit=">= 1",
                          value=args.top, where=f"--top {args.top}")
    a = load_run(args.a, args.target, where=f"A.json {args.a}")
    b = load_run(args.b, args.target, where=f"B.json {args.b}")
    d = diff_runs(a, b, top=args.top)
    if args.json:
        from .output import print_json
        print_json(d.to_dict())
        return 0
    from rich.markup import escape

    from .kernel_view import DISPLAY, pct
    from .output import console, table
    con = console()
    name = lambda r: escape(f"{r.kernel} on {r.target}")  # noqa: E731
    f = d.figures
    rows = [("latency", f"{d.latency_us.a:,.3f} us", f"{d.latency_us.b:,.3f} us",
             _signed(d.latency_us.delta, " us") + _speed(d.speedup))]
    if "instructions" in f:
        n = f["instructions"]
        rows.append(("instructions", f"{int(n.a):,}", f"{int(n.b):,}", f"{int(n.delta):+,}"))
    if "hbm_gbps" in f:
        g = f["hbm_gbps"]
        rows.append(("HBM bandwidth", f"{g.a:,.1f} GB/s", f"{g.b:,.1f} GB/s",
                     _signed(g.delta, " GB/s", 1)))
    if "hfu" in f:
        h = f["hfu"]
        rows.append(("HFU", pct(h.a), pct(h.b), _signed(100 * h.delta, " pt", 1)))
    for k, v in d.engines.items():
        rows.append((f"{DISPLAY.get(k, k)} busy", pct(v.a), pct(v.b), _signed(100 * v.delta, " pt", 1)))
    con.print(table(f"A = {name(d.a)} ({escape(args.a)}), B = {name(d.b)} ({escape(args.b)})",
                    ["figure", "A", "B", "B - A"], rows))
    if d.by_line:
        con.print(table("hotspots by source line (largest change first)",
                        ["line", "code", "A time", "B time", "B - A", "A instr", "B instr"],
                        [(escape(r.key), escape((r.code or "")[:50]), *_times(r)) for r in d.by_line]))
    if d.by_opcode:
        con.print(table("per opcode (largest change first)",
                        ["opcode", "engine", "A time", "B time", "B - A", "A instr", "B instr"],
                        [(r.key[0], DISPLAY.get(r.key[1], r.key[1]), *_times(r))
                         for r in d.by_opcode]))
    con.print(f"A: {escape(str(d.verdict_a))}")
    con.print(f"B: {escape(str(d.verdict_b))}")
    return 0


def _times(r) -> tuple:
    """A hotspot row's A time, B time, change and instruction counts, as printed."""
    t, n = r.time_ns, r.instructions
    return (f"{t.a / 1e3:,.3f} us", f"{t.b / 1e3:,.3f} us", _signed(t.delta / 1e3, " us"),
            f"{int(n.a):,}", f"{int(n.b):,}")
