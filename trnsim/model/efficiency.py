"""Efficiency factors: the gap between our per-op costs and the Neuron compiler's code, per op class and
generation, calibrated only on the rows of ``data/calibration_rows.csv`` (see ``calibrate.py``).

An op's time is divided by the factor of its class: ``compute`` (matmul / attention bound by TensorE),
``memory`` (matmul / attention bound by HBM) and ``vector`` (norms, softmax, elementwise, embedding,
optimizer). Collectives carry no model-side factor: their times, runtime constants included, are the
fabric's (trnsim.fabric), as ``trnsim collective`` prints them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional

from .datafiles import load
from .ops import Op, RooflineOpCosts

CLASSES = ("compute", "memory", "vector")
# a class only some generations calibrate; where absent it takes the factor of the class named here
EXTRA_CLASSES = {"expert": "memory"}
KINDS = ("train", "ttft", "tpot")


def op_class(op: Op, roof: RooflineOpCosts) -> str:
    """The efficiency class of ``op``: which roofline bound it sits under, or vector."""
    if op.kind in ("matmul", "attention"):
        comp = op.flops / roof.peak(op.dtype)
        mem = op.bytes / roof.hbm_bytes_per_s
        if comp < mem and op.name.startswith("moe.selected."):
            return "expert"   # expert weights loaded one selected expert at a time (unfused decode)
        return "compute" if comp >= mem else "memory"
    return "vector"


@dataclass(frozen=True)
class Calibration:
    """Factors per class and the error band per estimate kind, with the rows they come from."""
    factors: Mapping[str, float]
    bands: Mapping[str, float]
    rows: tuple = ()
    note: str = ""

    def factor(self, cls: str) -> float:
        """Efficiency factor of an op class (1.0 when not calibrated; an extra class not calibrated takes
        the factor of the class it refines)."""
        if cls not in self.factors and cls in EXTRA_CLASSES:
            cls = EXTRA_CLASSES[cls]
        return float(self.factors.get(cls, 1.0))

    def band(self, kind: str) -> float:
        """Relative error band of an estimate kind (train / ttft / tpot)."""
        return float(self.bands.get(kind, max(self.bands.values()) if self.bands else 0.5))


def calibration_for(target: str, how: str = "roofline", overrides: Optional[Mapping[str, float]] = None,
                    serving: bool = False) -> Calibration:
    """The calibration of ``target`` for op costs obtained ``how``; generations without rows borrow the
    closest calibrated one and widen the band by the file's ``uncalibrated_band_scale``. ``serving``: an
    inference estimate, which takes the generation's [serving.<target>] section (fitted on its serving rows,
    roofline op costs) where there is one."""
    data = load("calibration")
    table = data.get(how) or data.get("roofline", {})
    note = ""
    entry = table.get(target)
    if serving and how == "roofline" and target in data.get("serving", {}):
        entry = data["serving"][target]
    if entry is None:
        fallback = data.get("fallback", {}).get(target, "trn1")
        entry = table.get(fallback, {})
        note = (f"no calibration rows for {target}; the {fallback} factors are used and the error band is "
                f"widened x{data.get('uncalibrated_band_scale', 2.0)}")
        scale = float(data.get("uncalibrated_band_scale", 2.0))
    else:
        scale = 1.0
    factors: Dict[str, float] = {c: float(entry.get(c, 1.0)) for c in CLASSES}
    factors.update({c: float(entry[c]) for c in EXTRA_CLASSES if c in entry})
    if overrides:
        factors.update({k: float(v) for k, v in overrides.items() if k in CLASSES or k in EXTRA_CLASSES})
    bands = {k: float(entry.get(f"band_{k}", 0.5)) * scale for k in KINDS}
    if how not in data:
        note = (note + "; " if note else "") + f"no calibration for {how} op costs: the roofline factors are used"
    return Calibration(factors=factors, bands=bands, rows=tuple(entry.get("rows", ())), note=note)
