"""The compatibility report: per-operator rows, CUDA findings, coverage, and what needs custom kernels."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from .classify import CUSTOM, OpTables
from .cuda_scan import CudaFinding
from .records import CapturedOp

MAX_LOCATIONS = 5  # source places listed per operator row; the count says how many there are in all


@dataclass(frozen=True)
class OpRow:
    """One operator of the captured graph, all its calls together."""
    op: str                       # "aten::linear", "mylib::fused_gelu"
    op_class: str                 # matmul, attention, ..., "custom" (outside aten), "unknown"
    count: int
    documented: bool              # in the torch-neuronx list (itself or everything it lowers to)
    costable: bool                # trnsim has a cost rule for its class
    cuda_only: bool               # an aten op with CUDA kernels only (flash / efficient attention)
    locations: Tuple[str, ...]    # distinct user "file:line" places, first MAX_LOCATIONS
    lowers_to: Tuple[str, ...] = ()

    @property
    def needs_kernel(self) -> bool:
        """Outside aten, CUDA-only, or uncostable: porting work (an NKI kernel or a rewrite)."""
        return self.op_class == CUSTOM or self.cuda_only or not self.costable

    def to_dict(self) -> dict:
        """Plain JSON-able fields (``needs_custom_kernel`` included)."""
        return {"op": self.op, "class": self.op_class, "count": self.count, "documented": self.documented,
                "costable": self.costable, "cuda_only": self.cuda_only, "needs_custom_kernel": self.needs_kernel,
                "locations": list(self.locations), "lowers_to": list(self.lowers_to)}


@dataclass(frozen=True)
class CompatReport:
    """What ``trnsim check`` found for one model and input shape."""
    model: str
    input_shapes: Tuple[Tuple[int, ...], ...]
    input_dtype: str
    capture: str                  # "torch.export" | "dispatch-trace"
    capture_note: str             # why the fallback was used, when it was
    rows: Tuple[OpRow, ...]
    cuda_findings: Tuple[CudaFinding, ...]
    total_ops: int                # operator calls counted (bookkeeping nodes left out)
    documented_ops: int
    costable_ops: int
    seconds: float
    supported_source: str
    ops: Tuple[CapturedOp, ...] = field(default=(), repr=False, compare=False)

    @property
    def documented_pct(self) -> float:
        """Share of operator calls on the torch-neuronx documented list, in percent."""
        return 100.0 * self.documented_ops / self.total_ops if self.total_ops else 100.0

    @property
    def costable_pct(self) -> float:
        """Share of operator calls trnsim can cost, in percent."""
        return 100.0 * self.costable_ops / self.total_ops if self.total_ops else 100.0

    @property
    def non_aten(self) -> Tuple[OpRow, ...]:
        """Rows of operators outside the aten namespace (custom extensions)."""
        return tuple(r for r in self.rows if r.op_class == CUSTOM)

    @property
    def uncostable(self) -> Tuple[OpRow, ...]:
        """Rows trnsim has no cost rule for."""
        return tuple(r for r in self.rows if not r.costable)

    @property
    def needs_custom_kernel(self) -> Tuple[OpRow, ...]:
        """Rows that need porting work: outside aten, CUDA-only or uncostable."""
        return tuple(r for r in self.rows if r.needs_kernel)

    def to_dict(self) -> dict:
        """Plain JSON-able values (what ``trnsim check --json`` prints and ``trnsim evaluate`` reads)."""
        return {
            "model": self.model, "input_shapes": [list(s) for s in self.input_shapes],
            "input_dtype": self.input_dtype, "capture": self.capture, "capture_note": self.capture_note,
            "total_ops": self.total_ops, "documented_ops": self.documented_ops, "costable_ops": self.costable_ops,
            "coverage_documented_pct": round(self.documented_pct, 2),
            "coverage_costable_pct": round(self.costable_pct, 2),
            "ops": [r.to_dict() for r in self.rows],
            "non_aten_ops": [r.op for r in self.non_aten],
            "uncostable_ops": [r.op for r in self.uncostable],
            "needs_custom_kernel": [r.to_dict() for r in self.needs_custom_kernel],
            "cuda_code": [f.to_dict() for f in self.cuda_findings],
            "supported_list_source": self.supported_source,
            "seconds": round(self.seconds, 3),
        }


def is_bookkeeping(op: CapturedOp) -> bool:
    """Export's own assertion and symbolic-size nodes: not operators the model runs."""
    return op.name.startswith("_assert") or op.name.startswith("sym_")


def build_rows(ops: Sequence[CapturedOp], tables: OpTables) -> List[OpRow]:
    """Group operator calls by ``namespace::name`` in order of first appearance."""
    groups: Dict[str, List[CapturedOp]] = OrderedDict()
    for op in ops:
        if not is_bookkeeping(op):
            groups.setdefault(op.qualname, []).append(op)
    rows = []
    for name, calls in groups.items():
        first = calls[0]
        locs = list(OrderedDict.fromkeys(str(c.loc) for c in calls if c.loc))
        lowers = list(OrderedDict.fromkeys(s.split("|")[0] for c in calls for s in c.lowers_to))
        rows.append(OpRow(op=name, op_class=tables.class_name(first), count=len(calls),
                          documented=all(tables.is_documented(c) for c in calls),
                          costable=tables.is_costable(first), cuda_only=tables.is_cuda_only(first),
                          locations=tuple(locs[:MAX_LOCATIONS]), lowers_to=tuple(lowers)))
    return rows


def coverage_counts(ops: Sequence[CapturedOp], tables: OpTables) -> Tuple[int, int, int]:
    """(operator calls, calls on the documented list, calls trnsim can cost), bookkeeping left out."""
    counted = [op for op in ops if not is_bookkeeping(op)]
    return (len(counted), sum(tables.is_documented(op) for op in counted),
            sum(tables.is_costable(op) for op in counted))
