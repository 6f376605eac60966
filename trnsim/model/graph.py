"""An op graph: costed ops with repeat counts, grouped by phase (forward, backward, recompute, optimizer).

Counts are floats so a backward pass can weigh a forward-shaped op (flash attention backward = 2.5x).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Tuple

from .ops import Op

PHASES = ("forward", "backward", "recompute", "optimizer", "head")


@dataclass(frozen=True)
class GraphOp:
    """One op of the graph, repeated ``count`` times in ``phase``."""
    op: Op
    count: float
    phase: str


@dataclass(frozen=True)
class OpGraph:
    """The ops one (logical) NeuronCore runs for one micro-batch (optimizer ops: once per step)."""
    ops: Tuple[GraphOp, ...]

    def flops(self, phase: str = "", kind: str = "") -> float:
        """Hand-formula FLOPs, optionally of one phase and/or one op kind."""
        return sum(g.count * g.op.flops for g in self.select(phase, kind))

    def select(self, phase: str = "", kind: str = "") -> Iterable[GraphOp]:
        """Graph ops of one phase and/or kind (all when empty)."""
        return (g for g in self.ops if (not phase or g.phase == phase) and (not kind or g.op.kind == kind))

    def time(self, op_seconds: Callable[[Op], float], phase: str = "") -> float:
        """Total seconds of the ops of ``phase`` given a per-op time function."""
        return sum(g.count * op_seconds(g.op) for g in self.select(phase))

    def by_phase(self, op_seconds: Callable[[Op], float]) -> Dict[str, float]:
        """Seconds per phase given a per-op time function."""
        out: Dict[str, float] = {}
        for g in self.ops:
            out[g.phase] = out.get(g.phase, 0.0) + g.count * op_seconds(g.op)
        return out

    def __add__(self, other: "OpGraph") -> "OpGraph":
        return OpGraph(self.ops + other.ops)
