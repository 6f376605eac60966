"""``trnsim models``: the model zoo with computed parameter counts (and ``--show NAME`` for one model)."""
from __future__ import annotations

from rich.markup import escape

from ..model import count_params, list_models, load_model
from .output import console, print_json, table


def register(subparsers) -> None:
    """Add ``models`` to the ``trnsim`` command line."""
    p = subparsers.add_parser("models", help="the model zoo with parameter counts",
                              description="List the built-in models (architectures as data, each with its "
                                          "source) with parameter counts computed from their shapes.")
    p.add_argument("--show", metavar="MODEL", help="every field of one model (a zoo name or a config.json)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_models)


def _b(n: float) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


def cmd_models(args) -> int:
    """Print the zoo (or one model with --show)."""
    if args.show:
        cfg = load_model(args.show)
        d = cfg.to_dict()
        d["params"] = count_params(cfg).to_dict()
        if args.json:
            print_json(d)
            return 0
        rows = [(k, escape(str(v))) for k, v in d.items() if k != "params" and v not in (0, 0.0, "", False)]
        rows += [(f"params.{k}", f"{v:,}") for k, v in d["params"].items()]
        console().print(table(f"{cfg.name}", ["field", "value"], rows))
        return 0
    models = list_models()
    if args.json:
        print_json({"models": models})
        return 0
    rows = []
    for m in models:
        pub = m["published_params"]
        diff = f"{m['params'] / pub - 1:+.1%}" if pub else "-"
        moe = f"{m['experts']} x top-{m['top_k']}" if m["experts"] else ""
        rows.append((m["name"], _b(m["params"]), _b(m["active_params"]) if moe else "",
                     _b(pub) if pub else "-", diff, m["layers"], m["hidden"], f"{m['heads']}/{m['kv_heads']}", moe))
    console().print(table("Model zoo (parameters computed from the architecture; published = headline count)",
                          ["model", "params", "active", "published", "diff", "layers", "hidden", "heads/kv",
                           "experts"], rows))
    return 0
