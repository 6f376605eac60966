"""Per-op time inside one estimate: asks the OpCosts once per distinct op, applies the efficiency factor of
the op's class, and remembers how each op was costed (simulated / interpolated / roofline)."""
from __future__ import annotations

from typing import Dict, List, Optional

from .efficiency import Calibration, op_class
from .graph import OpGraph
from .ops import Op, OpCosts, RooflineOpCosts


class Costing:
    """Memoised, calibrated op times for one estimate."""

    def __init__(self, costs: OpCosts, roof: Optional[RooflineOpCosts], calib: Calibration):
        self.costs, self.roof, self.calib = costs, roof, calib
        self._memo: Dict[Op, tuple] = {}
        self.how: Dict[str, set] = {}

    def _entry(self, op: Op) -> tuple:
        e = self._memo.get(op)
        if e is None:
            t = self.costs.time(op)
            # a system whose factors live inside its op costs (a GPU) has no roofline to classify by
            cls = op_class(op, self.roof) if self.roof is not None else op.kind
            e = (t.seconds / self.calib.factor(cls), cls, t.seconds)
            self._memo[op] = e
            self.how.setdefault(t.how, set()).add(op.name)
        return e

    def seconds(self, op: Op) -> float:
        """Calibrated seconds of ``op`` on one (logical) core."""
        return self._entry(op)[0]

    def by_class(self, graph: OpGraph, phase: str = "") -> Dict[str, float]:
        """Calibrated seconds of a graph (or one phase of it) split by efficiency class."""
        out: Dict[str, float] = {}
        for g in graph.select(phase):
            t, cls, _ = self._entry(g.op)
            out[cls] = out.get(cls, 0.0) + g.count * t
        return out

    def bound(self, op: Op) -> str:
        """"memory" where ``op`` streams HBM faster than it computes, else "compute"."""
        if self.roof is not None:
            return "memory" if op_class(op, self.roof) == "memory" else "compute"
        bound = getattr(self.costs, "bound", None)
        return bound(op) if bound else "compute"

    def parts(self, graph: OpGraph) -> Dict[str, float]:
        """Seconds of a graph split into streaming weights (memory-bound matmuls), reading the KV cache
        (memory-bound attention) and the rest (compute-bound ops, vector ops)."""
        out = {"weights": 0.0, "kv": 0.0, "compute": 0.0}
        for g in graph.ops:
            mem = self.bound(g.op) == "memory"
            part = ("weights" if g.op.kind == "matmul" else "kv" if g.op.kind == "attention" else "compute") \
                if mem else "compute"
            out[part] += g.count * self.seconds(g.op)
        return out

    def ops_by_how(self) -> Dict[str, List[str]]:
        """Op names grouped by how their cost was obtained."""
        return {k: sorted(v) for k, v in sorted(self.how.items())}
