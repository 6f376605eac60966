"""Fit the efficiency factors (compute, memory, vector) of one generation to the calibration rows, and
compare every row's prediction with its published value.

Only the rows in ``data/calibration_rows.csv`` are used. The fit minimises squared log errors with a
finite-difference Gauss-Newton on log(1/efficiency), factors bounded (roofline costs cannot be beaten).
Collectives are the fabric's (trnsim.fabric), with no model-side factor; the command line fit also solves the
two fabric constants of a compiled graph's collectives that only model rows expose (trn1's in-graph call
cost and rings' link fraction, FABRIC_FIT) jointly with the factors. Run ``python -m trnsim.model.calibrate
--write`` to refresh ``data/calibration.toml`` and those figures of ``hardware/data/fabric.toml``.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from .datafiles import DATA_DIR, load, reload
from .efficiency import CLASSES, KINDS

EFF_MIN = 0.02          # choice: below 2% of the roofline a factor would hide a modelling error, not a gap
BAND_FLOOR = 0.10       # choice: two rows per kind cannot measure spread; never claim better than +-10%
RIDGE = 1e-3            # pulls unidentified factors toward 1 (no gap) instead of letting them wander
SIMULATED_MAX = 4.0     # choice: the compiler's code may beat our reference kernels, by at most 4x


@dataclass(frozen=True)
class RowResult:
    """One calibration row: published figure, prediction, relative error, time per estimate."""
    id: str
    kind: str
    metric: str
    model: str
    published: float
    predicted: float
    seconds: float

    @property
    def error(self) -> float:
        """Relative error of the prediction (predicted / published - 1)."""
        return self.predicted / self.published - 1.0


def rows() -> Dict[str, dict]:
    """The calibration rows as published (id -> csv row)."""
    with open(os.path.join(DATA_DIR, "calibration_rows.csv"), newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def runs() -> Dict[str, dict]:
    """How each row is run through the estimator (data/calibration_runs.toml)."""
    return dict(load("calibration_runs"))


def predict(row_id: str, efficiency: Optional[Mapping[str, float]] = None, costs=None,
            hardware_file: Optional[str] = None) -> float:
    """The estimator's value of a row's metric, in the row's units (``hardware_file``: a catalog override,
    e.g. fabric runtime constants under trial)."""
    from .infer import estimate_inference
    from .train import estimate_training
    run = runs()[row_id]
    kw = dict(run["args"])
    if run["kind"] == "train":
        e = estimate_training(run["model"], run["instance"], costs=costs, efficiency=efficiency,
                              check_memory=False, hardware_file=hardware_file, **kw)
    else:
        e = estimate_inference(run["model"], run["instance"], costs=costs, efficiency=efficiency,
                               check_memory=False, hardware_file=hardware_file, **kw)
    return float(getattr(e, run["metric"])) / float(run.get("scale", 1.0))


def _time_like(row_id: str, value: float) -> float:
    """Metrics that grow with speed (seq/s, MFU) become times so errors compare the same way."""
    return 1.0 / value if runs()[row_id]["metric"] in ("seq_per_s", "mfu", "tokens_per_s") else value


# fabric runtime constants (fabric.toml [runtime.<gen>]) a model fit may solve jointly with the factors: the
# in-graph collective costs, which only model rows expose (a compiled graph's collectives are not timed alone)
FABRIC_FIT = {"graph_call_overhead_s": (1e-6, 1e-3), "bandwidth_efficiency": (EFF_MIN, 1.0)}


def fabric_file(target: str, values: Mapping[str, float], folder: str) -> str:
    """A hardware file holding ``values`` as fabric.toml [runtime.<target>] overrides (one file per vector:
    the catalog and the fabric's memos are cached per file path)."""
    name = "fabric-" + "-".join(f"{k}={v:.6g}" for k, v in sorted(values.items())) + ".toml"
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        body = "".join(f'{k} = {{ value = {float(v)!r}, source = "trial of the model calibration fit" }}\n'
                       for k, v in sorted(values.items()))
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"[fabric.runtime.{target}]\n" + body)
    return path


def fit(costs_factory: Optional[Callable[[], object]] = None, iterations: int = 25,
        eff_max: Optional[float] = None, fabric: Mapping[str, float] = (), target: str = "trn1"
        ) -> Dict[str, float]:
    """Efficiency factors minimising the squared log error over every calibration row. Roofline costs
    are a lower bound, so their factors stay <= 1; other costs (our simulated kernels may be slower than the
    compiler's code) may go up to SIMULATED_MAX. ``fabric``: fabric runtime constants of ``target`` (names of
    FABRIC_FIT -> starting values) fitted jointly; they come back in the result beside the factors."""
    import tempfile
    ids = sorted(rows())
    costs = costs_factory() if costs_factory else None
    pub = np.array([_time_like(i, float(rows()[i]["value"])) for i in ids])
    fab = list(dict(fabric))
    names = list(CLASSES) + fab
    # z = log(1 / efficiency) per class and for fabric fractions; log(seconds) for fabric costs
    top = eff_max if eff_max is not None else (1.0 if costs is None else SIMULATED_MAX)
    lo = [-math.log(top)] * len(CLASSES)
    hi = [-math.log(EFF_MIN)] * len(CLASSES)
    z0 = [0.0] * len(CLASSES)
    for k in fab:
        a, b = FABRIC_FIT[k]
        cost = k.endswith("_s")
        lo.append(math.log(a) if cost else -math.log(b))
        hi.append(math.log(b) if cost else -math.log(a))
        z0.append(math.log(fabric[k]) if cost else -math.log(fabric[k]))
    lo, hi, z = np.array(lo), np.array(hi), np.array(z0)
    folder = tempfile.mkdtemp(prefix="trnsim-fit-")

    def decode(zv):
        out = {c: math.exp(-v) for c, v in zip(CLASSES, zv)}
        out.update({k: math.exp(v) if k.endswith("_s") else math.exp(-v) for k, v in zip(fab, zv[len(CLASSES):])})
        return out

    def resid(zv):
        vals = decode(zv)
        eff = {c: vals[c] for c in CLASSES}
        hw = fabric_file(target, {k: vals[k] for k in fab}, folder) if fab else None
        pred = np.array([_time_like(i, predict(i, eff, costs, hw)) for i in ids])
        return np.log(pred) - np.log(pub)

    r = resid(z)
    damp = 1e-2
    is_class = np.arange(len(names)) < len(CLASSES)
    ridge = np.where(is_class, RIDGE, 0.0)   # only the factors are pulled toward 1
    for _ in range(iterations):   # Levenberg-Marquardt on the log errors, bounds by clipping
        J = np.empty((len(ids), len(names)))
        for j in range(len(names)):
            dz = np.zeros(len(names))
            dz[j] = 1e-3
            J[:, j] = (resid(z + dz) - r) / 1e-3
        while damp < 1e6:
            A = np.vstack([J, np.diag(np.sqrt(ridge + damp))])
            b = np.concatenate([-r, -np.sqrt(ridge) * z * is_class])
            z_new = np.clip(z + np.linalg.lstsq(A, b, rcond=None)[0], lo, hi)
            r_new = resid(z_new)
            if np.sum(r_new ** 2) < np.sum(r ** 2) - 1e-12:
                z, r, damp = z_new, r_new, damp / 3
                break
            damp *= 4
        else:
            break
    return decode(z)


def evaluate(efficiency: Optional[Mapping[str, float]] = None, costs=None,
             hardware_file: Optional[str] = None) -> List[RowResult]:
    """Every row: published vs predicted (with the given factors, or the recorded calibration; fabric
    constants under trial in ``hardware_file``)."""
    out = []
    for rid, row in sorted(rows().items()):
        t0 = time.perf_counter()
        p = predict(rid, efficiency, costs, hardware_file)
        run = runs()[rid]
        out.append(RowResult(id=rid, kind=run["kind"], metric=run["metric"], model=run["model"],
                             published=float(row["value"]),
                             predicted=p, seconds=time.perf_counter() - t0))
    return out


def bands(results: List[RowResult]) -> Dict[str, float]:
    """Error band per estimate kind: the largest relative error of its rows, at least BAND_FLOOR."""
    out = {}
    for k in KINDS:
        errs = [abs(_time_like(r.id, r.predicted) / _time_like(r.id, r.published) - 1.0)
                for r in results if r.kind == k]
        out[k] = max([BAND_FLOOR] + errs)
    return out


def write(factors: Mapping[str, float], results: List[RowResult], target: str = "trn1", how: str = "roofline"
          ) -> str:
    """Record the factors of [how.target] in data/calibration.toml, keeping the other sections."""
    data = {k: v for k, v in load("calibration").items()}
    b = bands(results)
    entry = {}
    entry.update({c: round(float(factors[c]), 4) for c in CLASSES})
    entry.update({f"band_{k}": round(b[k], 3) for k in KINDS})
    entry["rows"] = [r.id for r in results]
    entry["results"] = [f"{r.id} {r.metric}: published {r.published:.4g}, predicted {r.predicted:.4g} "
                        f"({r.error:+.1%})" for r in results]
    data.setdefault(how, {})[target] = entry
    lines = ["# Efficiency factors per op class and generation: the gap between trnsim's per-op costs and the",
             "# Neuron compiler's code, fitted ONLY on the rows of calibration_rows.csv (ids in each section) by",
             "# `python -m trnsim.model.calibrate --write` (roofline op costs) or `python bench/models.py --costs",
             "# simulated --refit --write`. Bands: the largest relative error of each kind's rows, at least",
             f"# {BAND_FLOOR:.0%} (two rows per kind cannot measure spread). Sections: [<op costs>.<generation>].",
             "# uncalibrated_band_scale (choice): a generation without rows of its own borrows trn1's factors, band x that.",
             "# [serving.<generation>]: what inference estimates take (roofline op costs), fitted on the generation's own",
             "# serving rows by `python bench/serving.py --refit --write`; training keeps [fallback] until it has rows.",
             "# The roofline fit solves fabric.toml [runtime.trn1] graph_call_overhead_s and bandwidth_efficiency with",
             "# the factors (the in-graph collective costs only model rows expose).",
             f"uncalibrated_band_scale = {data.get('uncalibrated_band_scale', 2.0)}", "", "[fallback]"]
    lines += [f'{k} = "{v}"' for k, v in data.get("fallback", {"trn2": "trn1", "trn3": "trn1"}).items()]
    for h, table in data.items():
        if not isinstance(table, dict) or h == "fallback":
            continue
        for t, e in table.items():
            lines += ["", f"[{h}.{t}]"]
            for k, v in e.items():
                lines.append(f"{k} = {_toml_value(v)}")
    path = os.path.join(DATA_DIR, "calibration.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    reload()
    return path


def _toml_value(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def current_fabric(target: str = "trn1") -> Dict[str, float]:
    """The fabric runtime constants of FABRIC_FIT as fabric.toml holds them now (the fit's starting point)."""
    from ..fabric.config import load_fabric_config
    rt = load_fabric_config().runtime(target)
    return {k: float(getattr(rt, k)) for k in FABRIC_FIT}


def write_fabric(values: Mapping[str, float], results: List[RowResult], target: str = "trn1") -> str:
    """Record jointly fitted fabric constants in hardware/data/fabric.toml [runtime.<target>] (value and
    source of each figure's line; the rest of the file as it is)."""
    import re
    from ..hardware.loader import DATA_DIR as HW_DIR
    path = os.path.join(HW_DIR, "fabric.toml")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    ids = " ".join(r.id for r in results)
    section = None
    for i, line in enumerate(lines):
        m = re.match(r"^\[(.+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        key = line.split("=", 1)[0].strip()
        if section == f"runtime.{target}" and key in values:
            lines[i] = (f'{key} = {{ value = {float(f"{values[key]:.4g}")!r}, source = "calibration: {ids}", '
                        f'note = "{FABRIC_NOTES[key]} (python -m trnsim.model.calibrate --write)" }}')
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return path


FABRIC_NOTES = {
    "graph_call_overhead_s": "fixed cost of one collective inside a compiled graph, fitted jointly with the roofline "
                             "factors on the model rows: the TP=32 decode rows (161 and 65 all-reduces of 16 and "
                             "8 KiB per token) expose it",
    "bandwidth_efficiency": "fraction of NeuronLink rate the pipelined rings reach (and, inside a compiled graph, "
                            "every class), fitted jointly with the roofline factors on the model rows: the TP=32 "
                            "prefill rows (2 and 1 MiB all-reduces) and M0505's TP=8 all-gathers and "
                            "reduce-scatters expose it; no standalone trn1 row is ring-class on NeuronLink",
}


def main(argv=None) -> int:
    """Fit the factors jointly with the in-graph fabric constants, print the rows, and with --write record
    the factors (calibration.toml) and the fabric constants (fabric.toml)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write data/calibration.toml and fabric.toml")
    args = ap.parse_args(argv)
    fitted = fit(fabric=current_fabric())
    factors = {c: fitted[c] for c in CLASSES}
    fab = {k: fitted[k] for k in FABRIC_FIT}
    import tempfile
    fab = {k: float(f"{v:.4g}") for k, v in fab.items()}   # as fabric.toml records them
    results = evaluate(factors, hardware_file=fabric_file("trn1", fab, tempfile.mkdtemp(prefix="trnsim-fit-")))
    print("factors:", {k: float(f"{v:.4g}") for k, v in factors.items()})
    print("fabric [runtime.trn1]:", {k: float(f"{v:.4g}") for k, v in fab.items()})
    for r in results:
        print(f"{r.id} {r.model:12s} {r.metric:10s} published {r.published:10.4g} predicted {r.predicted:10.4g} "
              f"error {r.error:+.1%}")
    if args.write:
        print("wrote", write_fabric(fab, results))
        print("wrote", write(factors, results))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
