"""The estimated Trainium time of one recorded graph: its ops timed by the model layer's per-op costs on
one (logical) NeuronCore of the chosen instance, plus the collectives the launch implies.

Ops run one after another (the estimator's convention for a captured graph); a collective hides under at
most ``training.dp_overlap_fraction`` (the share ``trnsim.model.train`` uses for a DP all-reduce) of the
backward compute recorded after it: DDP's bucketed all-reduces issued during backward partly hide, the
single gradient all-reduce of ``xm.optimizer_step`` (issued after backward, before the update that needs
it) is exposed.  MFU divides the matmul and attention FLOPs by the stated
dense BF16 peak of one logical core.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from ...model.config import ModelConfig
from ...model.context import make_context
from ...model.datafiles import figure
from .graphs import GraphOps
from .recorder import short_loc

MODEL_FLOP_KINDS = ("matmul", "attention")


@dataclass(frozen=True)
class OpRow:
    """One costed call of the step, in program order, with its start on the estimated timeline."""
    name: str
    kind: str
    phase: str
    start_s: float
    seconds: float
    flops: float
    bytes: float
    shape: str
    loc: str


@dataclass(frozen=True)
class StepEstimate:
    """Estimated Trainium time of one graph on one rank, its breakdown, and what it could not cost."""
    instance: str
    target: str
    lnc: int
    world: int
    step_s: float
    compute_s: float
    by_phase: Mapping[str, float]
    by_kind: Mapping[str, float]
    comm_s: float
    comm_exposed_s: float
    flops: float            # matmul + attention FLOPs of the step on one rank
    tokens: int             # tokens per rank per step (the forward embedding's index count), 0 if none
    mfu: float
    peak_flops: float
    rows: Tuple[OpRow, ...]
    collectives: Tuple[Tuple[str, float, float], ...]   # (op, bytes, seconds)
    unlowered: Tuple[str, ...]

    def to_dict(self, with_rows: bool = False) -> Dict:
        """JSON-ready fields (per-op rows only when asked)."""
        d = dataclasses.asdict(self)
        if not with_rows:
            d.pop("rows")
        return d


def _shape(op) -> str:
    if op.kind == "matmul":
        return f"{op.batch}x[{op.m}x{op.k}]@[{op.k}x{op.n}]" if op.batch > 1 else f"[{op.m}x{op.k}]@[{op.k}x{op.n}]"
    if op.kind == "attention":
        return f"{op.heads}x q{op.q_len} kv{op.kv_len} d{op.head_dim}"
    return f"{op.rows}x{op.cols}"


class Estimator:
    """Times graphs for one instance and world size (the context and its op-cost memo are shared)."""

    def __init__(self, instance: str, world: int = 1, hardware_file: Optional[str] = None,
                 lnc: Optional[int] = None):
        from ...model.parallel import make_system
        system = make_system(instance, 1, lnc, hardware_file)
        nodes = max(1, math.ceil(world / system.cores_per_node))
        placeholder = ModelConfig(name="xla-graph", hidden=1, layers=1, heads=1, vocab=1, intermediate=1)
        self.ctx = make_context(placeholder, instance, nodes, lnc, "bf16", None, None, None, hardware_file)
        self.world = world
        sysm = self.ctx.system
        self.peak = sysm.chip.peak_flops.bf16 / sysm.chip.cores * sysm.lnc
        self.overlap = float(figure("estimator", "training.dp_overlap_fraction"))

    def estimate(self, g: GraphOps) -> StepEstimate:
        """Estimated step of graph ``g`` on one rank."""
        sec = self.ctx.costing.seconds
        rows: List[OpRow] = []
        bwd_before: List[float] = [0.0]
        by_phase: Dict[str, float] = {}
        by_kind: Dict[str, float] = {}
        t = flops = 0.0
        for it in g.items:
            s = it.count * sec(it.op)
            rows.append(OpRow(it.qualname, it.op.kind, it.phase, t, s, it.count * it.op.flops,
                              it.count * it.op.bytes, _shape(it.op), short_loc(it.loc)))
            t += s
            by_phase[it.phase] = by_phase.get(it.phase, 0.0) + s
            bwd_before.append(bwd_before[-1] + (s if it.phase == "backward" else 0.0))
            by_kind[it.op.kind] = by_kind.get(it.op.kind, 0.0) + s
            if it.op.kind in MODEL_FLOP_KINDS:
                flops += it.count * it.op.flops
        compute = t
        ranks = list(range(self.world))
        comm = exposed = used = 0.0
        colls = []
        for c in g.collectives:
            ct = self.ctx.comm_s(c.op, c.bytes, ranks)
            window = self.overlap * (bwd_before[-1] - bwd_before[min(c.after, len(bwd_before) - 1)]) - used
            hidden = max(0.0, min(ct, window))
            used += hidden
            comm += ct
            exposed += ct - hidden
            colls.append((c.op, c.bytes, ct))
            rows.append(OpRow(c.op, "collective", c.phase, t, ct, 0.0, c.bytes, f"{c.bytes:.0f} B x {self.world} ranks",
                              short_loc(c.loc)))
            t += ct
        step = compute + exposed
        sysm = self.ctx.system
        mfu = flops / (step * self.peak) if step > 0 else 0.0
        return StepEstimate(instance=sysm.instance.key, target=sysm.target, lnc=sysm.lnc, world=self.world,
                            step_s=step, compute_s=compute, by_phase=by_phase, by_kind=by_kind, comm_s=comm,
                            comm_exposed_s=exposed, flops=flops, tokens=g.tokens, mfu=mfu, peak_flops=self.peak,
                            rows=tuple(rows), collectives=tuple(colls),
                            unlowered=tuple(dict.fromkeys(n for n, _ in g.unlowered)))
