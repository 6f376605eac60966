"""Engine assignment for instructions the kernel left to the compiler (``engine=unknown``).

The NKI layer records such instructions with ``("engine_auto", capable engines)`` (default first;
only engines that support the op on the traced generation and can touch its operands' memories).
The Neuron compiler balances this work over Vector, GpSimd and Scalar (issue 13); its heuristic is
not public, so the model is a documented, overridable policy (``timing.assign`` in cores.toml,
``Options.engine_policy`` / ``TRNSIM_ENGINE_POLICY``):

- ``fixed``: the traced default engine (the behaviour before issue 13);
- ``earliest_finish``: at issue time (program order), the capable engine on which the instruction
  would finish first, given its engine's queue, the shared ports (v2) and its own cost on that
  engine; a non-default engine must win by ``switch_margin_ns``; ties keep registry order.

The C scheduler (``_native_schedule.h``) implements the same rule from the per-shape alternatives
``alternatives`` builds; the tests hold both to the same Timeline.
"""
from __future__ import annotations

from typing import Sequence, Tuple

from ..ir.trace import Instruction
from .costs import ComputeCost, CostModel


# The engine whose dependencies on its own earlier instructions the in-order pipeline satisfies:
# Tensor-engine instructions depend on each other only through PSUM writes (the PE reads SBUF
# only), which the array makes in issue order, so back-to-back matmuls accumulating into one bank
# run at the issue interval ("full tiles issued back-to-back reach peak"; "accumulating K tiles
# needs no extra instruction" [ARCH2]), not one result latency apart.  The C scheduler takes its
# engine code as an argument.
IN_ORDER_ENGINE = "tensor"


def ready(preds: Sequence[int], end, engines, eng: str, sync_ns: float) -> float:
    """When the results ``eng`` waits for are ready: the latest end of its predecessors, plus the
    cross-engine semaphore when the producer ran elsewhere (a Tensor instruction's earlier Tensor
    predecessors count as ready: the engine's own order covers them)."""
    t = 0.0
    for p in preds:
        if eng == IN_ORDER_ENGINE and engines[p] == eng:
            continue
        r = end[p]
        if sync_ns and engines[p] != eng:
            r += sync_ns
        if r > t:
            t = r
    return t


def cost_on(model: CostModel, ins: Instruction, eng: str) -> ComputeCost:
    """The cost of ``ins`` were it to run on ``eng``."""
    if eng == ins.engine:
        return model.compute(ins)
    if not hasattr(ins, "_replace"):  # a record that is not an Instruction tuple: copy it as one
        ins = Instruction(*[getattr(ins, f) for f in Instruction._fields])
    return model.compute(ins._replace(engine=eng))


def assign(ins: Instruction, alts: Tuple[str, ...], preds: Sequence[int], end, engines, resources,
           ports, model: CostModel) -> Tuple[str, ComputeCost]:
    """(engine, cost) the ``earliest_finish`` policy picks for ``ins`` among ``alts``."""
    sync_ns = model.t.sync.cross_engine_ns
    margin = model.switch_margin_ns
    best = None
    for k, e in enumerate(alts):
        c = cost_on(model, ins, e)
        r = ready(preds, end, engines, e, sync_ns)
        res = resources[e]
        st = res.free_at if res.free_at > r else r
        for h in (ports.needed(e, ins) if ports.active else ()):
            if h.free_at > st:
                st = h.free_at
        occ = c.occupancy_ns
        if c.hidden_ns and res.free_at > r:
            occ -= min(c.hidden_ns, res.free_at - r)
        score = st + occ
        if k:
            score += margin
        if best is None or score < best[0]:
            best = (score, e, c)
    return best[1], best[2]
