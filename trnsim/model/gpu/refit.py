"""Re-fit the GPU op-level efficiency scale on shared/calibration/gpus.csv rows with the full estimator.

The lumped step factors of efficiency.toml hold communication and pipeline bubbles; ``estimate_training``
costs those itself, so a scale on the tensor factors is fitted such that the estimator's best layout for
each row reproduces the published step time (geometric mean over the rows of one precision).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from ...errors import ConfigError
from .calibration import load_runs
from ..train import estimate_training
from .system import gpu_system

GRID = dict(tp=(1, 2, 4, 8), pp=(1, 2, 4, 8), cp=(1, 2), recompute=("none", "selective", "full"))
PREC_KEY = {"bf16": "training.matmul_bf16_scale", "fp8": "training.matmul_fp8_scale"}


@dataclass(frozen=True)
class RowPrediction:
    """A calibration row: the estimator's best layout and step time vs the published one."""
    row: str
    gpu_system: str
    model: str
    precision: str
    gpus: int
    layout: str
    published_step_s: float
    predicted_step_s: float

    @property
    def error(self) -> float:
        """(predicted - published) / published."""
        return self.predicted_step_s / self.published_step_s - 1.0


SYSTEM_OF_GPU = {"h100-sxm": "p5.48xlarge", "h200-sxm": "p5en.48xlarge", "b200": "p6-b200.48xlarge"}


def best_step(model: str, system: str, nodes: int, seq: int, gb: int, precision: str,
              figures: Optional[Mapping[str, float]] = None):
    """The fastest step of the small layout grid that fits; None when none fits."""
    best = None
    gs = gpu_system(system, nodes, figures=figures)
    for tp, pp, cp, rc in itertools.product(*GRID.values()):
        try:
            e = estimate_training(model, gs, tp=tp, pp=pp, cp=cp, zero=1, sp=tp > 1, seq=seq,
                                  global_batch=gb, recompute=rc, precision=precision)
        except ConfigError:
            continue
        if best is None or e.step_time_s < best.step_time_s:
            best = e
    return best


def predict_rows(figures: Optional[Mapping[str, float]] = None) -> List[RowPrediction]:
    """Every calibration run predicted by the estimator at its best layout."""
    out = []
    for r in load_runs():
        system = SYSTEM_OF_GPU[r.gpu]
        from ...hardware.gpus import load_gpu_catalog
        per = load_gpu_catalog().system(system).gpus
        e = best_step(r.model, system, max(1, r.gpus // per), r.seq, r.global_batch, r.precision, figures)
        if e is None:
            continue
        lay = ", ".join(f"{k}={v}" for k, v in e.parallel.items() if k in ("tp", "pp", "cp", "dp")) + \
            f", recompute={e.recompute}"
        out.append(RowPrediction(row=r.row, gpu_system=system, model=r.model, precision=r.precision,
                                 gpus=r.gpus, layout=lay, published_step_s=r.step_time_s,
                                 predicted_step_s=e.step_time_s))
    return out


def refit(iterations: int = 4) -> Dict[str, float]:
    """Scales per precision such that the rows' geometric-mean step error is ~0 (bf16 first, then fp8)."""
    scales = {k: 1.0 for k in PREC_KEY.values()}
    for prec in ("bf16", "fp8"):
        for _ in range(iterations):
            rows = [p for p in predict_rows(scales) if p.precision == prec]
            if not rows:
                break
            ratio = math.exp(sum(math.log(p.predicted_step_s / p.published_step_s) for p in rows) / len(rows))
            scales[PREC_KEY[prec]] *= ratio
    return scales
