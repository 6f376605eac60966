"""Estimate a list of ``Op`` records that did not come from the transformer builder (a graph captured from
a user's torch model by ``trnsim check``): forward time on one (logical) NeuronCore, and with
``training`` the backward pass the builder would add (matmul dgrad + wgrad, flash attention 2.5x, 2x for
vector ops). Shapes are taken as given: the capture decides the per-core shapes."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence

from .graph import GraphOp, OpGraph
from .ops import Op, OpCosts
from .lora import adapters_for_matmul, make_lora
from .transformer import backward_of


@dataclass(frozen=True)
class OpsEstimate:
    """Time of a captured op list on one (logical) NeuronCore, by phase and by op kind."""
    instance: str
    lnc: int
    ops: int
    forward_s: float
    backward_s: float
    total_s: float
    flops: float
    by_kind: Mapping[str, float]
    error_band: float
    ops_by_how: Mapping[str, List[str]]
    sim_seconds: float
    notes: tuple = ()

    def to_dict(self) -> Dict:
        """JSON-ready dict of every field."""
        return dataclasses.asdict(self)


def estimate_ops(ops: Sequence[Op], instance: str = "trn2.48xlarge", lnc: Optional[int] = None,
                 training: bool = False, costs: Optional[OpCosts] = None, hardware_file: Optional[str] = None,
                 efficiency: Optional[Mapping[str, float]] = None, precision: str = "bf16",
                 lora_rank: Optional[int] = None) -> OpsEstimate:
    """Forward (and with ``training`` backward) time of ``ops`` on one rank of ``instance`` (a NeuronCore
    or a GPU), calibrated like the zoo estimates; collectives are not included (a captured graph names
    none). ``lora_rank``: LoRA fine-tuning, the weights frozen and an adapter on every weight matmul."""
    from .context import make_context
    from .config import ModelConfig
    t0 = time.perf_counter()
    # the context needs a model only for its name; the ops carry their own shapes
    placeholder = ModelConfig(name="captured", hidden=1, layers=1, heads=1, vocab=1, intermediate=1)
    ctx = make_context(placeholder, instance, 1, lnc, precision, None, costs, None, hardware_file, efficiency,
                       training=training)
    lora = make_lora(lora_rank, None) if lora_rank else None
    # a weight matmul (a linear layer: batch 1) is frozen under LoRA and gets an adapter; batched matmuls
    # multiply two activations (attention scores) and keep both input gradients
    weight = lambda op: op.kind == "matmul" and op.batch == 1 and op.k > 0 and op.n > 0  # noqa: E731
    pairs = [(op, lora is not None and weight(op)) for op in ops]
    if lora is not None:
        pairs += [(a, False) for op in ops if weight(op) for a in adapters_for_matmul(op, lora.rank)]
    items: List[GraphOp] = [GraphOp(op, 1.0, "forward") for op, _ in pairs]
    if training:
        for op, frozen in pairs:
            items += backward_of(op, frozen)
    graph = OpGraph(tuple(items))
    sec = ctx.costing.seconds
    phases = graph.by_phase(sec)
    by_kind: Dict[str, float] = {}
    for g in graph.ops:
        by_kind[g.op.kind] = by_kind.get(g.op.kind, 0.0) + g.count * sec(g.op)
    fwd, bwd = phases.get("forward", 0.0), phases.get("backward", 0.0)
    return OpsEstimate(instance=ctx.system.key, lnc=ctx.system.lnc, ops=len(ops), forward_s=fwd,
                       backward_s=bwd, total_s=fwd + bwd, flops=graph.flops(), by_kind=by_kind,
                       error_band=ctx.calib.band("train" if training else "ttft"),
                       ops_by_how=ctx.costing.ops_by_how(), sim_seconds=time.perf_counter() - t0,
                       notes=tuple(n for n in (ctx.calib.note,) if n) + (
                           (f"LoRA r={lora.rank} on every weight matmul (a captured graph names no projections); "
                            "weights frozen: dgrad only",) if lora else ()))
