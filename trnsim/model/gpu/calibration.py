"""Fit the GPU efficiency factors to shared/calibration/gpus.csv (rows copied in data/) by hand FLOP formula.

Dense-transformer training FLOPs per token = 6 x (parameters - input embedding) + attention
12 x layers x d_model x seq, halved for causal attention (the work a causal fused kernel does).
With causal=False the formula gives NVIDIA's own "model flops per sample" in P294 and P301.
bf16 rows fit the bf16 factor (matmul and attention alike: a step-level row cannot separate them);
fp8 rows then fit the fp8 matmul factor with attention at its bf16 factor.  The full model estimator
will replace this step formula once trnsim/model lands; the factors are lumped: they absorb what the
published runs spent on communication, pipeline bubbles and non-matmul ops.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from ...errors import HardwareFileError
from ...hardware.figures import read_toml, unwrap_figures
from ...hardware.gpus import GpuCatalog, load_gpu_catalog

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@dataclass(frozen=True)
class TransformerDims:
    """The shape of a dense decoder-only transformer (GQA: ``kv_dim`` = KV heads x head dim)."""
    key: str
    name: str
    layers: int
    d_model: int
    kv_dim: int
    ffn: int
    vocab: int


@dataclass(frozen=True)
class CalibrationRun:
    """One published training run read from a calibration row."""
    row: str
    gpu: str
    model: str
    precision: str
    gpus: int
    seq: int
    global_batch: int
    tokens_per_s: float
    step_time_s: float

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Published throughput of one GPU."""
        return self.tokens_per_s / self.gpus


def param_count(d: TransformerDims) -> float:
    """Parameters: per layer Q,O (d^2 each), K,V (d x kv), gated MLP (3 d ffn), two norms; untied
    embedding and head (V x d each), final norm."""
    per_layer = 2 * d.d_model ** 2 + 2 * d.d_model * d.kv_dim + 3 * d.d_model * d.ffn + 2 * d.d_model
    return float(d.layers * per_layer + 2 * d.vocab * d.d_model + d.d_model)


def split_train_flops_per_token(d: TransformerDims, seq: int, causal: bool = True) -> Dict[str, float]:
    """Training FLOPs per token (forward + backward = 3 x forward): ``dense`` (6 x non-embedding-input
    parameters) and ``attention`` (12 L d seq, halved when causal)."""
    dense = 6.0 * (param_count(d) - d.vocab * d.d_model)  # the input embedding is a lookup, not a matmul
    attn = 12.0 * d.layers * d.d_model * seq * (0.5 if causal else 1.0)
    return {"dense": dense, "attention": attn}


def train_flops_per_token(d: TransformerDims, seq: int, causal: bool = True) -> float:
    """Total hand-formula training FLOPs per token."""
    return sum(split_train_flops_per_token(d, seq, causal).values())


def load_models(path: Optional[str] = None) -> Dict[str, TransformerDims]:
    """Architectures of the calibration models (data/calibration_models.toml)."""
    p = path or os.path.join(DATA, "calibration_models.toml")
    raw = read_toml(p, "data-file")
    vals = unwrap_figures(raw.get("models", {}), "models", p, {}, raw.get("tags", {}), "data-file")
    out = {}
    for key, t in vals.items():
        try:
            out[key] = TransformerDims(key=key, name=t["name"], layers=int(t["layers"]),
                                       d_model=int(t["d_model"]), kv_dim=int(t["kv_dim"]),
                                       ffn=int(t["ffn"]), vocab=int(t["vocab"]))
        except KeyError as e:
            raise HardwareFileError(f"{p}: models.{key} is missing {e.args[0]}", rule="data-file-missing",
                                    value=f"models.{key}.{e.args[0]}") from None
    return out


def load_runs(path: Optional[str] = None) -> List[CalibrationRun]:
    """The calibration runs (data/calibration_runs.toml), each citing its gpus.csv row id."""
    p = path or os.path.join(DATA, "calibration_runs.toml")
    raw = read_toml(p, "data-file")
    vals = unwrap_figures(raw.get("runs", {}), "runs", p, {}, raw.get("tags", {}), "data-file")
    runs = []
    for row, t in vals.items():
        try:
            runs.append(CalibrationRun(row=row, gpu=t["gpu"], model=t["model"], precision=t["precision"],
                                       gpus=int(t["gpus"]), seq=int(t["seq"]),
                                       global_batch=int(t["global_batch"]),
                                       tokens_per_s=float(t["tokens_per_s"]),
                                       step_time_s=float(t["step_time_s"])))
        except KeyError as e:
            raise HardwareFileError(f"{p}: runs.{row} is missing {e.args[0]}", rule="data-file-missing",
                                    value=f"runs.{row}.{e.args[0]}") from None
    return runs


@dataclass(frozen=True)
class RowFit:
    """What one calibration row says: achieved FLOP/s per GPU and its efficiency against dense peak."""
    row: str
    gpu: str
    precision: str
    flops_per_token: float
    achieved_flops_per_gpu: float
    peak_flops: float

    @property
    def efficiency(self) -> float:
        """Achieved / dense peak at the row's precision (all FLOPs counted at that precision)."""
        return self.achieved_flops_per_gpu / self.peak_flops


def row_fits(runs: List[CalibrationRun], models: Mapping[str, TransformerDims],
             catalog: Optional[GpuCatalog] = None) -> List[RowFit]:
    """Achieved FLOP/s per GPU of each run by the hand formula."""
    cat = catalog or load_gpu_catalog()
    out = []
    for r in runs:
        f = train_flops_per_token(models[r.model], r.seq)
        out.append(RowFit(row=r.row, gpu=r.gpu, precision=r.precision, flops_per_token=f,
                          achieved_flops_per_gpu=f * r.tokens_per_s_per_gpu,
                          peak_flops=cat.gpu(r.gpu).peak_flops(r.precision)))
    return out


def fit_factors(runs: List[CalibrationRun], models: Mapping[str, TransformerDims],
                catalog: Optional[GpuCatalog] = None) -> Dict[str, float]:
    """Lumped tensor efficiency per precision: bf16 = geometric mean over bf16 rows; fp8 solved per row
    with attention at the bf16 factor, then the geometric mean over fp8 rows."""
    cat = catalog or load_gpu_catalog()
    fits = {f.row: f for f in row_fits(runs, models, cat)}
    bf16 = [fits[r.row].efficiency for r in runs if r.precision == "bf16"]
    out = {"bf16": _geomean(bf16)} if bf16 else {}
    for prec in ("fp8", "fp4"):
        effs = []
        for r in (x for x in runs if x.precision == prec):
            if "bf16" not in out:
                raise HardwareFileError("an fp8/fp4 row needs a bf16 row for its attention factor",
                                        rule="calibration", value=r.row)
            gpu = cat.gpu(r.gpu)
            split = split_train_flops_per_token(models[r.model], r.seq)
            t_tok = 1.0 / r.tokens_per_s_per_gpu
            t_attn = split["attention"] / (gpu.peak_flops("bf16") * out["bf16"])
            effs.append(split["dense"] / ((t_tok - t_attn) * gpu.peak_flops(prec)))
        if effs:
            out[prec] = _geomean(effs)
    return out


def _geomean(xs: List[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


@dataclass(frozen=True)
class RunPrediction:
    """A calibration row predicted by the hand step formula through ``GpuOpCosts`` vs as published."""
    row: str
    gpu: str
    model: str
    precision: str
    gpus: int
    published_step_s: float
    predicted_step_s: float
    published_tokens_per_s_per_gpu: float
    predicted_tokens_per_s_per_gpu: float

    @property
    def error(self) -> float:
        """Relative step-time error, (predicted - published) / published."""
        return self.predicted_step_s / self.published_step_s - 1.0

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "error": self.error}


def predict_runs(runs: List[CalibrationRun], models: Mapping[str, TransformerDims],
                 catalog: Optional[GpuCatalog] = None, efficiency_file: Optional[str] = None,
                 ) -> List[RunPrediction]:
    """Step time of each run: its dense and attention FLOPs per GPU as two aggregate ``Op``s timed by
    ``GpuOpCosts`` (memory traffic and kernel overheads are negligible at this size)."""
    from ..ops import Op
    from .costs import GpuOpCosts
    cat = catalog or load_gpu_catalog()
    out = []
    for r in runs:
        costs = GpuOpCosts(r.gpu, r.precision, catalog=cat, efficiency_file=efficiency_file)
        split = split_train_flops_per_token(models[r.model], r.seq)
        tokens_per_gpu = r.global_batch * r.seq / r.gpus
        step = (costs.time(Op(kind="matmul", name="dense", flops=split["dense"] * tokens_per_gpu)).seconds
                + costs.time(Op(kind="attention", name="attention", causal=True,
                                flops=split["attention"] * tokens_per_gpu)).seconds)
        out.append(RunPrediction(row=r.row, gpu=r.gpu, model=r.model, precision=r.precision, gpus=r.gpus,
                                 published_step_s=r.step_time_s, predicted_step_s=step,
                                 published_tokens_per_s_per_gpu=r.tokens_per_s_per_gpu,
                                 predicted_tokens_per_s_per_gpu=tokens_per_gpu / step))
    return out
