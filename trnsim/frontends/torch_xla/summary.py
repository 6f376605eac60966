"""The end-of-run summary as plain data: mean and steady step, tokens/s, MFU, graphs seen and compiled,
the recompilations with the tensor and line that changed shape, the ops with no Trainium lowering, and the
projection of the script run data-parallel over the whole instance."""
from __future__ import annotations

from typing import Dict, List

from .projection import project_instance
from .recorder import short_loc

MIN_STEPS_FOR_EVERY_STEP = 3   # "recompiles every step" needs a few steps to be a pattern, not a warm-up


def _unlowered(session) -> Dict[str, Dict]:
    out: Dict[str, Dict] = {}
    steady = steady_graph(session).id
    for g in session.graphs.values():
        from .graphs import graph_ops  # the per-graph list is cheap to rebuild and not kept on the estimate
        for name, loc in graph_ops(g.calls).unlowered:
            row = out.setdefault(name, {"calls_per_step": 0, "where": short_loc(loc), "graphs": set()})
            row["graphs"].add(g.id)
            if g.id == steady:
                row["calls_per_step"] += 1
    for row in out.values():
        row["graphs"] = sorted(row["graphs"])
    return out


def steady_graph(session):
    """The graph run most often (ties: the later one), whose estimate is the steady-state step."""
    return max(session.graphs.values(), key=lambda g: (g.uses, g.id))


def summarize(session) -> Dict:
    """JSON-ready summary of a session."""
    steps = session.steps
    if not steps:
        return {"instance": session.instance, "world": session.world, "steps": 0, "graphs_distinct": 0,
                "note": "no xm.mark_step() / optimizer_step(barrier=True) was reached: nothing was estimated"}
    g = steady_graph(session)
    est = g.est
    n = len(steps)
    new_after_first = sum(1 for s in steps[1:] if s.new)
    recomp: List[Dict] = [{"graph": x.id, "step": x.first_step, "reason": x.reason}
                          for x in sorted(session.graphs.values(), key=lambda x: x.id) if x.id > 1]
    tokens = est.tokens * session.world
    cpu = [s.cpu_s for s in steps]
    return {
        "instance": est.instance, "target": est.target, "lnc": est.lnc, "world": session.world,
        "steps": n, "graphs_seen": n, "graphs_distinct": len(session.graphs),
        "compiled": sum(1 for x in session.graphs.values() if x.status == "compiled"),
        "cache_hits": sum(1 for x in session.graphs.values() if x.status == "cache hit"),
        "cache_dir": session.cache.dir, "cache_note": session.cache.note,
        "mean_step_s": sum(s.est_s for s in steps) / n,
        "steady_graph": g.id, "steady_step_s": est.step_s,
        "breakdown_s": {**{k: v for k, v in est.by_phase.items()}, "comm_exposed": est.comm_exposed_s},
        "comm_s": est.comm_s, "collectives": [{"op": o, "bytes": b, "seconds": t} for o, b, t in est.collectives],
        "tokens_per_step": tokens, "tokens_per_s": tokens / est.step_s if tokens and est.step_s else None,
        "mfu": est.mfu, "model_flops_per_rank": est.flops,
        "cpu_mean_s": sum(cpu) / n, "cpu_steady_mean_s": (sum(cpu[1:]) / (n - 1)) if n > 1 else cpu[0],
        "instance_projection": project_instance(session, g),
        "recompilations": recomp,
        "recompiles_every_step": n >= MIN_STEPS_FOR_EVERY_STEP and new_after_first == n - 1,
        "unlowered_ops": _unlowered(session),
        "graphs": [{"id": x.id, "hash": x.hash, "ops": len(x.calls), "first_step": x.first_step, "uses": x.uses,
                    "status": x.status, "step_s": x.est.step_s, "reason": x.reason}
                   for x in sorted(session.graphs.values(), key=lambda x: x.id)],
        "per_step": [{"step": s.step, "graph": s.graph, "est_s": s.est_s, "cpu_s": s.cpu_s, "new": s.new}
                     for s in steps],
        "costs": "roofline per-op costs from the catalog, calibrated like `trnsim estimate`",
    }
