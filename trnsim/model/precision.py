"""Matmul precision and structured sparsity per generation: which Op dtype, what weight size, what rate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import ConfigError
from ..hardware.schema import ChipSpec, CoreSpec
from .datafiles import figure

PRECISIONS = ("bf16", "fp8", "mxfp8", "mxfp4")
_OP_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3", "mxfp8": "mxfp8", "mxfp4": "mxfp4"}


class PrecisionError(ConfigError):
    """A number format or sparsity pattern the chosen generation does not have."""
    rule = "precision"


@dataclass(frozen=True)
class Precision:
    """How matmuls run: the Op dtype, bytes per stored weight, and the structured-sparsity speed-up."""
    name: str
    op_dtype: str
    weight_bytes: float
    sparsity: Optional[str] = None
    sparse_speedup: float = 1.0
    note: str = ""


def resolve(precision: str, sparsity: Optional[str], core: CoreSpec, chip: ChipSpec) -> Precision:
    """Check ``precision`` / ``sparsity`` against the generation and return how matmuls are costed."""
    p = (precision or "bf16").lower()
    if p not in PRECISIONS:
        raise PrecisionError(f"unknown precision {precision!r}", limit=PRECISIONS, value=precision)
    if p.startswith("mx") and not core.tensor.mx:
        raise PrecisionError(f"{chip.name} has no MX (microscaling) matmul, so {p} is not available",
                             limit="mxfp8/mxfp4 need trn3", value=p, hint="use --precision bf16 or fp8")
    note = ""
    if p == "fp8" and not core.tensor.double_row and core.timing.tensor.fp8_speedup <= 1.0:
        note = f"fp8 runs at the BF16 rate on {chip.name} (cFP8); only memory shrinks"
    speed = 1.0
    if sparsity:
        pats = figure("estimator", "sparsity.patterns")
        if sparsity not in pats:
            raise PrecisionError(f"unknown sparsity pattern {sparsity!r}", limit=pats, value=sparsity)
        pf = chip.peak_flops
        if not pf.sparse:
            raise PrecisionError(f"{chip.name} has no structured-sparse matmul rate", limit="trn2 or trn3",
                                 value=sparsity)
        dense = pf.bf16 if p == "bf16" else (pf.fp8 or pf.bf16) if p == "fp8" else (pf.mxfp8 or pf.bf16)
        speed = max(pf.sparse / dense, 1.0)
        note = (note + "; " if note else "") + (
            f"{sparsity} sparsity at the stated sparse rate ({speed:.2f}x dense {p}): a hardware capability "
            "the public NKI API does not expose yet")
    return Precision(name=p, op_dtype=_OP_DTYPE[p], weight_bytes=float(figure("estimator", f"precision.{p}")),
                     sparsity=sparsity, sparse_speedup=speed, note=note)
