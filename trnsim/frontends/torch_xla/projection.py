"""The whole-instance projection: the recorded script run data-parallel over every logical NeuronCore of
the instance (32 on a trn1.32xlarge; 64 on a trn2.48xlarge at LNC=2).

Each rank runs the steady step's graph (its ops, the same per-rank micro-batch) and the step adds the
gradient all-reduce of the trainable parameters over all the instance's ranks, issued after the backward
pass and before the update that needs it, so exposed (the same timing rule as a multi-rank launch, in
``costing.Estimator``).  A run that already had several ranks keeps the collectives it recorded, now over
the instance's ranks; a one-process run, which reduced nothing, gets the all-reduce of the gradient bytes
its optimizer step updated.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from .costing import Estimator
from .graphs import graph_ops

ASSUMES = ("pure data parallelism over every logical NeuronCore of one instance; each rank runs the recorded "
           "steady step on the same per-rank micro-batch; no change to gradient accumulation; one gradient "
           "all-reduce per step after the backward pass (exposed), as xm.optimizer_step issues it")


def project_instance(session, graph, hardware_file: Optional[str] = None) -> Dict:
    """JSON-ready projection of ``graph`` (the steady one) run data-parallel over the whole instance."""
    est = graph.est
    hw = hardware_file if hardware_file is not None else session.hardware_file
    from ...model.system import make_system
    ranks = make_system(est.instance, 1, est.lnc, hw).cores_per_node
    if session.world > ranks:
        return {"ranks": ranks, "step_s": None, "assumes": ASSUMES,
                "note": f"the run already has {session.world} ranks, more than one instance's {ranks}"}
    g = graph_ops(graph.calls)
    if not g.collectives and g.grad_at is not None and g.grad_bytes > 0:
        g = dataclasses.replace(g, collectives=(g.grad_at,))
    p = Estimator(est.instance, ranks, hw, est.lnc).estimate(g)
    tokens = p.tokens * ranks
    extra = {} if g.collectives else {"note": "no optimizer step in the steady graph: nothing to all-reduce"}
    return {
        **extra, "ranks": ranks, "lnc": p.lnc, "assumes": ASSUMES,
        "grad_bytes": g.grad_bytes,
        "step_s": p.step_s, "compute_s": p.compute_s, "comm_s": p.comm_s, "comm_exposed_s": p.comm_exposed_s,
        "collectives": [{"op": o, "bytes": b, "seconds": t} for o, b, t in p.collectives],
        "tokens_per_step": tokens, "tokens_per_s": tokens / p.step_s if tokens and p.step_s else None,
        "mfu": p.mfu,
    }
