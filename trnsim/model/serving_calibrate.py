"""The trn2/trn3 serving rows (``data/serving_rows.csv``, run as ``data/serving_runs.toml`` says): predict
each row, compare with its published value, and fit one generation's constants -- the efficiency factors
of ``calibration.toml`` and the Neuron fixed costs of ``neuron_serving.toml`` -- on the rows not held out.

The fit minimises the mean absolute log error by a coordinate search in log space (few constants, rows
that are slow to evaluate: no gradients needed). Held-out rows are predicted, never fitted.
"""
from __future__ import annotations

import csv
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from .datafiles import DATA_DIR, load

EFF_KEYS = ("compute", "memory", "vector", "expert")
RUNTIME_KEYS = ("op_fixed_s", "step_overhead_s", "prefill_fixed_s", "moe_block_fixed_s", "moe_block_tokens")
# choice: bounds of the search (log space); the fixed costs between 0.01 us and 1 s, factors 2%..100% of
# the roofline (expert loads down to 0.5%); collectives are the fabric's, with its own runtime constants
BOUNDS = {"compute": (0.02, 1.0), "memory": (0.02, 1.0), "expert": (0.005, 1.0), "vector": (0.02, 1.0), "op_fixed_s": (1e-8, 1e-4), "step_overhead_s": (1e-5, 0.1),
          "prefill_fixed_s": (1e-5, 1.0), "moe_block_fixed_s": (1e-7, 1e-3),
          "moe_block_tokens": (16, 1024)}
SPEED_METRICS = ("output_tokens_per_s",)


@dataclass(frozen=True)
class RowResult:
    """One serving row: published figure, prediction, relative error."""
    id: str
    generation: str
    model: str
    metric: str
    published: float
    predicted: float
    holdout: bool
    seconds: float

    @property
    def error(self) -> float:
        """Relative error of the prediction (predicted / published - 1)."""
        return self.predicted / self.published - 1.0


def rows() -> Dict[str, dict]:
    """The serving rows as published (id -> csv row)."""
    with open(os.path.join(DATA_DIR, "serving_rows.csv"), newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def runs() -> Dict[str, dict]:
    """How each row is run (data/serving_runs.toml); ids with a suffix ("P102b") read the row's next figure."""
    return dict(load("serving_runs"))


def published(run_id: str) -> float:
    """The row's published figure in the run's units (the second of "a / b" figures for a "b" run)."""
    run = runs()[run_id]
    if "published" in run:
        return float(run["published"])
    base = run_id.rstrip("b") if run_id.endswith("b") else run_id
    text = rows()[base]["value"]
    nums = [float(x.replace(",", "")) for x in re.findall(r"[\d,]*\.?\d+", text)]
    return nums[1] if run_id.endswith("b") else nums[0]


def generation(run_id: str) -> str:
    """trn2 / trn3, as the row states."""
    base = run_id.rstrip("b") if run_id.endswith("b") else run_id
    return rows()[base]["generation"]


def setup_of(run: Mapping, overrides: Optional[Mapping[str, float]] = None):
    """The ServingSetup a run describes (with fixed-cost overrides)."""
    from .neuron import ServingSetup, Speculation
    s = dict(run.get("setup", {}))
    spec = s.pop("spec", None)
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}
    if spec:
        acc = spec.get("acceptance")
        kw["spec"] = Speculation(kind=spec["kind"], tokens=int(spec["tokens"]), acceptance=float(
            acc if acc is not None else load("neuron_serving")["speculation"][f"{spec['kind']}_acceptance"]["value"]))
    return ServingSetup(overrides=dict(overrides or {}), **kw)


def predict(run_id: str, constants: Optional[Mapping[str, float]] = None) -> float:
    """The estimator's value of a run's metric (``constants``: efficiency factors and fixed costs to try)."""
    from .infer import estimate_inference
    run = runs()[run_id]
    c = dict(constants or {})
    eff = {k: c[k] for k in EFF_KEYS if k in c} or None
    gen = generation(run_id)
    rt = {f"runtime.{gen}.{k}": c[k] for k in RUNTIME_KEYS if k in c}
    e = estimate_inference(run["model"], run["instance"], check_memory=False, efficiency=eff,
                           serving=setup_of(run, rt), **run["args"])
    node = e
    for part in run["metric"].split("."):
        node = node[part] if isinstance(node, Mapping) else getattr(node, part)
    return float(node)


def evaluate(constants: Optional[Mapping[str, Mapping[str, float]]] = None, only: Optional[List[str]] = None
             ) -> List[RowResult]:
    """Every run (or ``only`` these) predicted with per-generation ``constants`` (None: the data files')."""
    out = []
    for rid, run in runs().items():
        if only is not None and rid not in only:
            continue
        gen = generation(rid)
        t = time.perf_counter()
        p = predict(rid, (constants or {}).get(gen))
        out.append(RowResult(rid, gen, run["model"], run["metric"], published(rid), p,
                             bool(run.get("holdout", False)), time.perf_counter() - t))
    return out


def _loss(res: List[RowResult]) -> float:
    return sum(abs(math.log(max(r.predicted, 1e-12) / r.published)) for r in res) / max(1, len(res))


def fit(gen: str, start: Mapping[str, float], rounds: int = 3, keys=EFF_KEYS + RUNTIME_KEYS, log=None
        ) -> Dict[str, float]:
    """Coordinate search of ``gen``'s constants on its rows that are not held out (mean |log error|)."""
    ids = [r for r, run in runs().items() if generation(r) == gen and not run.get("holdout", False)]
    cur = dict(start)

    def loss(c):
        return _loss(evaluate({gen: c}, ids))

    best = loss(cur)
    step = math.log(4.0)
    for rnd in range(rounds):
        for k in keys:
            lo, hi = BOUNDS[k]
            for sgn in (1, -1):
                while True:
                    trial = dict(cur)
                    trial[k] = min(hi, max(lo, cur[k] * math.exp(sgn * step)))
                    if trial[k] == cur[k]:
                        break
                    l2 = loss(trial)
                    if l2 < best - 1e-4:
                        cur, best = trial, l2
                    else:
                        break
            if log:
                log(f"round {rnd} {k}={cur[k]:.4g} loss {best:.4f}")
        step /= 2.0
    return cur


def current(gen: str) -> Dict[str, float]:
    """The constants of ``gen`` as the data files hold them now."""
    from .efficiency import calibration_for
    from .neuron import runtime
    cal = calibration_for(gen, serving=True)
    c = {k: cal.factor(k) for k in EFF_KEYS}
    c.update(runtime(gen))
    return c
