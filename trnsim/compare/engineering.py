"""Step 3 of the evaluation: engineering and migration cost over 12 months (porting effort at the user's rate,
keeping two paths, first-run compilation on paid instances, data egress) and the break-even in tokens.
Figures from ``data/engineering.toml`` (sources there), every one overridable."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from ..cost import break_even
from ..errors import ConfigError
from ..hardware.figures import read_toml, unwrap_figures

ENGINEERING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "engineering.toml")


class EngineeringError(ConfigError):
    """An engineering-cost input out of range or unknown."""
    rule = "engineering"


def load_defaults(overrides: Optional[Mapping[str, float]] = None) -> Dict[str, float]:
    """``{"effort.custom_kernel": 80.0, ...}`` from engineering.toml with ``overrides`` (same keys) on top."""
    prov: dict = {}
    raw = read_toml(ENGINEERING_FILE, "engineering-file")
    vals = unwrap_figures({k: v for k, v in raw.items() if k != "sources"}, "", ENGINEERING_FILE, prov,
                          rule="data-file")
    flat = {f"{s}.{k}": float(v) for s, t in vals.items() if s != "example_prices" for k, v in t.items()}
    for k, v in (overrides or {}).items():
        if k not in flat:
            raise EngineeringError(f"unknown engineering figure {k!r}", limit=sorted(flat), value=k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise EngineeringError(f"{k} must be a number >= 0", limit=">= 0", value=v)
        flat[k] = float(v)
    return flat


def source_of(key: str) -> str:
    """The source text of one figure (for the report's 'basis' column)."""
    raw = read_toml(ENGINEERING_FILE, "engineering-file")
    sect, _, name = key.partition(".")
    node = raw.get(sect, {}).get(name, {})
    src = str(node.get("source", ""))
    return src + (f": {node['note']}" if node.get("note") else "")


def example_prices() -> Dict[str, float]:
    """Prices the built-in example uses where none is published (labelled derived)."""
    raw = read_toml(ENGINEERING_FILE, "engineering-file")
    return {k: float(v["value"]) for k, v in raw.get("example_prices", {}).items()}


@dataclass(frozen=True)
class Item:
    """One engineering / migration cost line."""
    item: str
    count: float
    hours: float
    usd: float
    source: str
    applies_to: str   # "trainium" (porting from CUDA) or "moved" (every system but the baseline)

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return dict(self.__dict__)


def porting_items(custom_ops: int, cuda_sites: int, figs: Mapping[str, float]) -> List[Item]:
    """Hour-based items of porting a CUDA-first model to Trainium and keeping both paths for the horizon."""
    rate = figs["rate.usd_per_hour"]
    rows = [("base port (XLA device, optimizer step, launch)", 1, figs["effort.base_port"], "effort.base_port"),
            ("ops needing a custom kernel or rewrite", custom_ops, figs["effort.custom_kernel"], "effort.custom_kernel"),
            ("hard-coded CUDA sites in the source", cuda_sites, figs["effort.cuda_site"], "effort.cuda_site"),
            ("keeping two infrastructure paths", figs["effort.months"], figs["effort.second_path_per_month"],
             "effort.second_path_per_month")]
    return [Item(item=n, count=float(c), hours=c * h, usd=c * h * rate, source=source_of(k), applies_to="trainium")
            for n, c, h, k in rows]


def compile_item(instances: int, usd_per_hour: float, figs: Mapping[str, float]) -> Item:
    """First-run compilation on the paid instances: minutes x recompiles x instances x price."""
    n = figs["compile.recompiles"]
    hours = figs["compile.minutes"] / 60.0 * n
    return Item(item="first-run compilation on paid instances", count=n, hours=0.0,
                usd=hours * instances * usd_per_hour, source=source_of("compile.minutes"), applies_to="trainium")


def egress_item(tokens: float, figs: Mapping[str, float], gb: Optional[float] = None) -> Item:
    """Moving the training data to where the new system runs (``gb``, default the tokenized dataset)."""
    size = gb if gb is not None else tokens * figs["egress.bytes_per_token"] / 1e9
    copies = figs["egress.copies"]
    return Item(item="data egress (12 months)", count=copies, hours=0.0, usd=size * copies * figs["egress.usd_per_gb"],
                source=source_of("egress.usd_per_gb") + f"; {size:,.0f} GB", applies_to="moved")


def added_costs(systems: List[Mapping], baseline: str, custom_ops: int, cuda_sites: int,
                figs: Mapping[str, float], egress_gb: Optional[float] = None) -> Dict:
    """Per system: the items that apply to it and their dollars; the break-even against the baseline."""
    port = porting_items(custom_ops, cuda_sites, figs)
    base = next(s for s in systems if s["system"] == baseline)
    per: Dict[str, Dict[str, float]] = {}
    breakeven = {}
    listed = list(port)
    for s in systems:
        items: Dict[str, float] = {}
        if s["kind"] == "trainium":
            for it in port:
                items[it.item] = it.usd
            it = compile_item(s["instances"], s["usd_per_hour"], figs)
            items[it.item] = it.usd
            listed.append(Item(**{**it.to_dict(), "item": f"{it.item}: {s['system']} x {s['instances']}"}))
        if s["system"] != baseline:
            it = egress_item(s["tokens"], figs, egress_gb)
            items[it.item] = it.usd
        per[s["system"]] = items
        if s["system"] != baseline:
            be = break_even(sum(items.values()), s["usd_per_mtok"], base["usd_per_mtok"])
            breakeven[s["system"]] = be.to_dict()
    listed.append(egress_item(base["tokens"], figs, egress_gb))
    by_item: Dict[str, Dict[str, float]] = {}
    for sys_, items in per.items():
        for name, usd in items.items():
            by_item.setdefault(name, {})[sys_] = usd
    return {"items": [i.to_dict() for i in listed], "usd_per_hour": figs["rate.usd_per_hour"],
            "per_system": per, "added_usd": {k: sum(v.values()) for k, v in per.items()},
            "added_by_item": by_item, "break_even": breakeven}
