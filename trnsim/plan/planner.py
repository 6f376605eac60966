"""``plan()``: enumerate the parallel layouts of a training run on a system, drop those that break a rule
or do not fit (counting why), estimate the rest with the model-level estimator and rank them."""
from __future__ import annotations

import itertools
import math
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..checks import check_params
from ..model.config import ModelConfig, load_model
from ..model.context import make_context
from ..model.system import make_system
from .backends import Progress, check_backend, run_batches
from .errors import PlanError
from .evaluate import CostsFactory, Evaluated, Job
from .objective import Power, Price, make_objective
from .result import Drop, PlanResult, Ranked
from .rules import Config, ModelFacts, same_but_recompute, violation
from .space import SearchSpace, figure, grids


def _counts(count: Union[int, Sequence[int]]) -> Tuple[int, ...]:
    items = [count] if isinstance(count, int) else list(count)
    try:
        out = tuple(sorted({int(c) for c in items}))
    except (TypeError, ValueError):
        out = ()
    if not out or out[0] < 1:
        raise PlanError("the instance count must be a positive integer (or a list of them)", rule="plan-count",
                        limit=">= 1", value=count)
    return out


def _positive(name: str, v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise PlanError(f"{name} must be a positive integer", rule="batch", limit=">= 1", value=v,
                        hint="give --global-batch (sequences per step) and --seq (tokens per sequence)")
    return v


def _lncs(space: SearchSpace, supported: Sequence[int], system: str) -> Tuple[int, ...]:
    if not space.lnc:
        return tuple(sorted(supported))
    bad = [x for x in space.lnc if x not in supported]
    if bad:
        raise PlanError(f"LNC={bad[0]} is not available on {system}", rule="lnc", limit=list(supported),
                        value=bad[0])
    return tuple(sorted(set(space.lnc)))


def enumerate_configs(cfg: ModelConfig, instance: str, counts: Sequence[int], lncs: Sequence[int],
                      space: SearchSpace, seq: int, global_batch: int, hardware_file: Optional[str] = None,
                      batch_seqs: float = 0.0) -> Tuple[List[Config], Dict[str, List], int]:
    """(configs passing every structural rule, rule -> [count, first config, reason], number enumerated);
    ``global_batch`` 0: each layout's own, ``batch_seqs`` rounded up to whole dp x micro-batch rounds."""
    facts = ModelFacts.of(cfg)
    keep: List[Config] = []
    drops: Dict[str, List] = {}
    total = 0
    for count in counts:
        for lnc in lncs:
            system = make_system(instance, count, lnc, hardware_file)
            g = grids(space, system.cores, system.fast_domain, facts.experts)
            total += g.size
            for tp, pp, vp, cp, ep, sp, zero, mb, rc in itertools.product(
                    g.tp, g.pp, g.vp, g.cp, g.ep, g.sp, g.zero, g.micro_batch, g.recompute):
                mp = tp * pp * cp
                c = Config(count, lnc, tp, pp, vp, cp, ep, sp, zero, mb, rc,
                           0 if system.cores % mp else system.cores // mp)
                bad = violation(c, facts, system.cores, seq, global_batch, batch_seqs, 0 in g.zero)
                if bad is None:
                    keep.append(c)
                    continue
                d = drops.get(bad[0])
                if d is None:
                    drops[bad[0]] = [1, c, bad[1]]
                else:
                    d[0] += 1
    return keep, drops, total


def _chunks(items: List[Config], workers: int) -> List[List[Config]]:
    size = int(figure("run", "chunk"))
    # at least four batches per worker so a slow batch does not leave the others idle
    size = max(1, min(size, math.ceil(len(items) / (4 * workers)) if items else 1))
    out: List[List[Config]] = []
    i = 0
    while i < len(items):
        j = min(len(items), i + size)
        # a layout's recompute options stay in one batch (recompute_first_fit looks back within a batch),
        # so the drop counts are the same on every backend and worker count
        while j < len(items) and same_but_recompute(items[j], items[j - 1]):
            j += 1
        out.append(items[i:j])
        i = j
    return out


def plan(model: Union[str, ModelConfig], system: str, count: Union[int, Sequence[int]] = 1, seq: int = 2048,
         global_batch: Optional[int] = None, batch_tokens: Optional[float] = None, precision: str = "bf16",
         objective: str = "time", top: int = 10,
         backend: str = "local", workers: Optional[int] = None, progress: Optional[Progress] = None,
         sparsity: Optional[str] = None, costs: Optional[CostsFactory] = None, comm: Optional[str] = None,
         hardware_file: Optional[str] = None, space: Optional[Mapping[str, Any]] = None,
         price: Optional[Price] = None, power: Optional[Power] = None,
         overrides: Optional[Mapping[str, Any]] = None, efficiency: Optional[Mapping[str, float]] = None,
         keep_rows: bool = True, framework: Optional[str] = None, lora_rank: Optional[int] = None,
         lora_targets: Optional[str] = None) -> PlanResult:
    """Search the training layouts of ``model`` on ``count`` x ``system`` and rank the ones that fit by
    ``objective`` (time: s/step; cost: USD/step from ``price``; energy: J/step from ``power``).  The step is
    ``global_batch`` sequences, or with ``batch_tokens`` each layout's own: the tokens rounded up to whole
    dp x micro-batch rounds, scored per ``batch_tokens / seq`` sequences so layouts compare fairly.
    ``framework`` lays memory out as that framework does, ``lora_rank`` searches a LoRA fine-tune."""
    t0 = time.perf_counter()
    check_params(model=model, system=system, count=count, seq=seq, global_batch=global_batch, top=top,
                 workers=workers, precision=precision, objective=objective, sparsity=sparsity, space=space)
    counts = _counts(count)
    seq = _positive("seq", seq)
    batch_seqs = 0.0
    if batch_tokens is not None and global_batch is None:
        if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, (int, float)) or not batch_tokens > 0:
            raise PlanError("batch tokens must be a positive number", rule="batch", limit="> 0", value=batch_tokens)
        batch_seqs, global_batch = float(batch_tokens) / seq, 0
    else:
        global_batch = _positive("global batch", global_batch)
    if not isinstance(top, int) or top < 1:
        raise PlanError("top must be a positive integer", rule="plan-top", limit=">= 1", value=top)
    n_workers = check_backend(backend, workers)
    cfg = model if isinstance(model, ModelConfig) else load_model(model)
    # resolve system, precision and sparsity once, so a bad name fails before any search
    ctx = make_context(cfg, system, counts[0], None, precision, sparsity, None, comm, hardware_file, efficiency)
    obj = make_objective(objective, ctx.system.key, price, power)
    if objective == "cost":
        obj.usd_per_hour()
    sp = space if isinstance(space, SearchSpace) else SearchSpace.default(space)
    lncs = _lncs(sp, ctx.system.lncs, ctx.system.key)

    keep, drops, total = enumerate_configs(cfg, system, counts, lncs, sp, seq, global_batch, hardware_file,
                                           batch_seqs)
    if progress:
        progress(0, len(keep), "estimating")
    job = Job(key=uuid.uuid4().hex, model=cfg, instance=system, seq=seq, global_batch=global_batch,
              precision=precision, sparsity=sparsity, costs=costs, comm=comm, hardware_file=hardware_file,
              overrides=dict(overrides) if overrides else None, efficiency=dict(efficiency) if efficiency else None,
              batch_seqs=batch_seqs, recompute_first_fit=sp.recompute_first_fit,
              framework=framework, lora_rank=lora_rank, lora_targets=lora_targets)
    t1 = time.perf_counter()
    batches = _chunks(keep, n_workers)
    rows: List[Evaluated] = [r for b in run_batches(job, batches, backend, n_workers, progress) for r in b]
    eval_wall = time.perf_counter() - t1

    scores: List[float] = []
    ok: List[Tuple[float, Config, Evaluated]] = []
    for r in rows:
        if r.status == "ok":
            s = obj.score(r.config.count, r.step_time_s, r.hfu)
            if batch_seqs:   # per the nominal batch: a layout rounding the batch up is charged per sequence
                s *= batch_seqs / r.global_batch
            ok.append((s, r.config, r))
            scores.append(s)
            continue
        scores.append(math.inf)
        d = drops.get(r.status)
        if d is None:
            drops[r.status] = [1, r.config, r.reason]
        else:
            d[0] += 1
    # ties broken by the configuration tuple itself: the same order on every backend
    ok.sort(key=lambda x: (x[0], x[1]))
    dropped = tuple(Drop(rule=k, count=v[0], example=v[1].label(), reason=v[2])
                    for k, v in sorted(drops.items(), key=lambda kv: (-kv[1][0], kv[0])))
    if not ok:
        worst = ", ".join(f"{d.rule}: {d.count}" for d in dropped)
        misses = [r for r in rows if r.status == "memory-fit"]
        near = min(misses, key=lambda r: (r.memory_gib, r.config)) if misses else None
        closest = f"the closest to fitting, {near.config.label()}, {near.reason}; " if near else ""
        raise PlanError(f"no layout of {cfg.name} on {'/'.join(map(str, counts))} x {system} passes every rule "
                        f"({total} enumerated; {worst})", rule="plan-empty", limit="at least one layout",
                        value=0, hint=closest + "try more instances (--count), a larger system or another global batch")
    best = tuple(Ranked(rank=i + 1, config=c.as_dict(), label=c.label(), score=s, step_time_s=r.step_time_s,
                        tokens_per_s=r.tokens_per_s, mfu=r.mfu, memory_per_core_gib=r.memory_gib,
                        hbm_per_core_gib=r.hbm_gib, comm_exposed_s=r.comm_exposed_s, bubble_s=r.bubble_s,
                        micro_batches=r.micro_batches, global_batch=r.global_batch)
                 for i, (s, c, r) in enumerate(ok[:top]))
    how = type(ctx.costing.costs).__name__ if costs is None else "injected"
    notes = [f"collectives timed by {ctx.comm_name}; op costs: {how}"]
    if objective == "energy":
        notes.append("power at the estimate's hardware FLOPs utilization (recompute included)")
    return PlanResult(model=cfg.name, system=ctx.system.key, counts=counts, seq=seq,
                      global_batch=global_batch, precision=ctx.prec.name, objective=obj.name,
                      objective_unit=obj.unit, enumerated=total, memory_checked=len(rows), estimated=len(ok),
                      dropped=dropped, best=best, backend=backend, workers=n_workers,
                      wall_s=time.perf_counter() - t0, eval_wall_s=eval_wall, space=sp.to_dict(),
                      notes=tuple(notes), batch_tokens=batch_seqs * seq, rows=tuple(rows) if keep_rows else (),
                      scores=tuple(scores) if keep_rows else ())
