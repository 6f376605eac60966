"""``evaluate()``: the three-step evaluation of a user's model in one record: (1) compatibility (the
``trnsim check`` dry run with coverage), (2) the ``compare`` table for the captured graph, (3) engineering
and migration cost over 12 months added to each system's total, with the break-even in tokens."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from ..checks import check_params
from ..cost import PowerModel, PriceBook
from ..errors import ConfigError
from .engine import Comparison, compare
from .engineering import added_costs, example_prices, load_defaults
from .systems import SystemRef
from .workload import Workload

@dataclass(frozen=True)
class Evaluation:
    """The comparison plus the compatibility report and the engineering cost."""
    comparison: Comparison
    compatibility: Optional[Mapping]      # CompatReport.to_dict(), None on the zoo fallback
    engineering: Mapping
    notes: Tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """The comparison's dict with an ``evaluation`` section (and totals with engineering added)."""
        d = self.comparison.to_dict()
        added = self.engineering["added_usd"]
        for s in d["systems"]:
            s["engineering_usd"] = added.get(s["system"], 0.0)
            s["total_with_engineering_usd"] = s["cost_usd"] + s["engineering_usd"]
        d["evaluation"] = {"compatibility": self.compatibility, "engineering": dict(self.engineering),
                           "added_usd": added, "added_by_item": self.engineering["added_by_item"],
                           "break_even": self.engineering["break_even"], "notes": list(self.notes),
                           "summary": self.summary()}
        return d

    def summary(self) -> str:
        """Plain sentences: coverage, porting cost, and where (if anywhere) a Trainium system pays back."""
        out = []
        c = self.compatibility
        if c:
            out.append(f"{c.get('documented_pct', 0):.0f} % of operator calls are on the torch-neuronx list; "
                       f"{len(c.get('needs_custom_kernel', []))} op(s) need a custom kernel; "
                       f"{len(c.get('cuda_findings', []))} hard-coded CUDA site(s).")
        for sys_, be in self.engineering["break_even"].items():
            if sys_ not in [r.system for r in self.comparison.rows if r.choice.system.kind == "trainium"]:
                continue
            if be["pays_back"]:
                out.append(f"{sys_} pays back ${be['porting_usd']:,.0f} of migration cost after "
                           f"{be['tokens']:.3g} tokens (this workload: {self.comparison.workload.total_tokens:.3g}).")
            else:
                out.append(f"{sys_} never pays back its ${be['porting_usd']:,.0f} migration cost: it is not cheaper "
                           f"per token than {self.comparison.baseline}.")
        return " ".join(out)


def _compat_dict(report) -> dict:
    d = report.to_dict()
    d.setdefault("documented_pct", report.documented_pct)
    d["needs_custom_kernel"] = [r.to_dict() for r in report.needs_custom_kernel]
    d["cuda_findings"] = [f.to_dict() for f in report.cuda_findings]
    return d


def evaluate(model: Any, input_shape: Sequence[Sequence[int]], workload: Workload,
             systems: Sequence[SystemRef], prices: PriceBook, power: Optional[PowerModel] = None,
             baseline: Optional[str] = None, engineering: Optional[Mapping[str, float]] = None,
             egress_gb: Optional[float] = None, kwargs: Optional[Dict[str, Any]] = None,
             start_delays: Optional[Mapping[str, float]] = None,
             progress: Optional[Callable[[str], None]] = None) -> Evaluation:
    """Run the three steps for ``model`` (``FILE.py:Class`` or an nn.Module) on one example input."""
    check_params(egress_gb=egress_gb)
    if workload.task not in ("train", "finetune"):
        raise ConfigError("evaluate estimates a training or fine-tuning run of your model", rule="evaluate-task",
                          limit=("train", "finetune"), value=workload.task,
                          hint="for serving, use trnsim compare --task infer --model ZOO_MODEL")
    from ..frontends.torch import require_torch
    require_torch()
    from ..frontends.torch import to_ops
    from ..frontends.torch.check import check_model
    from .captured import captured_chooser
    step = progress or (lambda _m: None)
    step("capturing the model (compatibility)")
    report = check_model(model, [tuple(s) for s in input_shape], "int64", kwargs=kwargs, train=True)
    ops = to_ops(report, dtype="bfloat16")
    tokens_per_example = int(math.prod(input_shape[0]))
    comp = compare(workload, systems, prices, power, baseline, start_delays,
                   choose_fn=captured_chooser(ops, tokens_per_example), progress=progress)
    return _finish(comp, _compat_dict(report), len(report.needs_custom_kernel), len(report.cuda_findings),
                   engineering, egress_gb, ())


def _finish(comp: Comparison, compat: Optional[dict], custom: int, cuda: int,
            engineering: Optional[Mapping[str, float]], egress_gb: Optional[float], notes: Tuple[str, ...]) -> Evaluation:
    figs = load_defaults(engineering)
    sys_dicts = [r.to_dict() for r in comp.rows]
    eng = added_costs(sys_dicts, comp.baseline, custom, cuda, figs, egress_gb)
    return Evaluation(comparison=comp, compatibility=compat, engineering=eng, notes=notes)
