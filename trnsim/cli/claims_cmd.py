"""``trnsim claims``: the published claims about Trainium's cost, speed and energy, each tested with trnsim's
own figure for the same comparison (holds / does not hold / holds if the price is at most $X/h)."""
from __future__ import annotations

from rich.markup import escape

from .compare_cmd import add_price_args
from .output import console, print_json, table


def register(sub) -> None:
    """Add ``trnsim claims`` to the command line."""
    p = sub.add_parser("claims", help="published Trainium claims tested against trnsim's own figures",
                       description="Each claim of trnsim/compare/data/claims.toml (with its source) read as a "
                                   "comparison, computed with the same configuration search as trnsim compare, "
                                   "and given a verdict; a cost claim on a system without a price gets the "
                                   "break-even hourly price instead.")
    add_price_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Test every claim, then print the table (or JSON)."""
    from ..compare.claims import load_claims, test_claims
    from ..compare.options import make_power, make_prices
    from .compare_cmd import Progress
    claims = load_claims()
    prices, power = make_prices(args.price_kind, args.price, args.prices), make_power(args.pue)
    with Progress(not args.json, len(claims)) as bar:
        results = test_claims(prices, power, claims, progress=bar.step)
    if args.json:
        print_json({"claims": [r.to_dict() for r in results]})
        return 0
    print_claims(results)
    return 0


def figure_text(r) -> str:
    """trnsim's figure for a claim, in the claim's own terms."""
    k = r.claim.kind
    if r.figure is None:
        return "n/a"
    if k == "cost_per_token":
        return f"$/token {r.figure:.2f}x the reference's (claimed <= {r.claimed:.2f}x)"
    what = {"tokens_per_energy": "tokens per MWh", "speedup": "faster", "peak_ratio": "peak FP8"}[k]
    return f"{r.figure:.2f}x {what} (claimed >= {r.claimed:g}x)"


def print_claims(results) -> None:
    """The claims table and, under it, how each claim was read and the prices used."""
    con = console()
    rows = [[escape(r.claim.text), escape(r.claim.source), escape(figure_text(r)), escape(r.sentence)]
            for r in results]
    con.print(table("Published claims, tested", ["claim", "source", "trnsim", "verdict"], rows))
    for r in results:
        prices = "; ".join(f"{k}: {v}" for k, v in r.prices.items())
        con.print(escape(f"- {r.claim.key}: {r.claim.reading}" + (f" [{r.detail}]" if r.detail else "")
                         + (f" prices: {prices}" if prices else "")))
