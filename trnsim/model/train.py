"""Training step estimate: compute per micro-batch from the op graph, TP/SP/CP/EP collectives on the
critical path, 1F1B pipeline with its bubble, DP gradient reduction (ZeRO-1 or all-reduce) partly hidden
under the backward pass, and the AdamW step."""
from __future__ import annotations

import time
from typing import Dict, Mapping, Optional, Union

from ..checks import check_params
from .config import ModelConfig
from .context import Context, add_collective, make_context
from .datafiles import figure
from .memory import GIB, expert_params_per_core, fit_error, params_per_core, training_memory
from .ops import OpCosts
from .parallel import Parallel, check_batch, group_ranks, resolve
from .system import SystemModel
from .results import TrainingEstimate
from .transformer import optimizer_graph, training_graph


def _collectives(ctx: Context, par: Parallel, micro_batch: int, seq: int, recompute: str, a: float
                 ) -> Dict[str, Dict]:
    """Per-micro-batch collectives of one pipeline stage: name -> {op, bytes, count (per micro-batch),
    seconds}."""
    cfg = ctx.cfg
    T = micro_batch * seq / par.cp
    layers = cfg.layers / par.pp
    fwd_passes = 2 if recompute == "full" else 1     # full recompute re-runs the forward collectives
    out: Dict[str, Dict] = {}

    def add(name, op, size, count, kind):
        t = ctx.comm_s(op, size, group_ranks(par, kind))
        if t > 0:
            out[name] = dict(op=op, bytes=size, count=count, seconds=t * count, group=kind)

    if par.tp > 1:
        size = T * cfg.hidden * a
        if par.sp:
            add("tp.all-gather", "all-gather", size, 2 * layers * (fwd_passes + 1), "tp")
            add("tp.reduce-scatter", "reduce-scatter", size, 2 * layers * (fwd_passes + 1), "tp")
        else:
            add("tp.all-reduce", "all-reduce", size, 2 * layers * (fwd_passes + 1), "tp")
        add("tp.embedding-all-reduce", "all-reduce", size, 1, "tp")
    if par.cp > 1 and not cfg.is_mla:
        kv = T * par.cp * 2 * max(1.0, cfg.n_kv / par.tp) * cfg.hd * a
        add("cp.all-gather-kv", "all-gather", kv, layers * fwd_passes, "cp")
        add("cp.reduce-scatter-dkv", "reduce-scatter", kv, layers, "cp")
    if par.ep > 1 and cfg.is_moe:
        size = T * cfg.top_k * cfg.hidden * a
        add("ep.all-to-all", "all-to-all", size, 2 * cfg.moe_layers / par.pp * (fwd_passes + 1), "ep")
    if par.pp > 1:
        size = T * cfg.hidden * a / (par.tp if par.sp else 1)
        add("pp.send-recv", "send-recv", size, 2 * par.vp, "pp")   # activation forward, gradient back, per chunk
    return out


def _dp_reduction(ctx: Context, par: Parallel, p_dense: float, p_expert: float, window: float, f) -> Dict:
    """DP gradient reduction per step: dense parameters over all dp ranks, routed experts over the dp / ep
    ranks holding the same experts. The reduce (all-reduce, or ZeRO-1's reduce-scatter) hides under
    ``window`` seconds of the last backward pass; ZeRO-1's parameter all-gather after the step does not."""
    out: Dict[str, Dict] = {}
    stride = par.tp * par.cp * par.pp
    groups = (("dp", p_dense, group_ranks(par, "dp")),
              ("edp", p_expert, [i * stride * par.ep for i in range(max(1, par.dp // par.ep))]))
    for name, params, ranks in groups:
        if params <= 0 or len(ranks) <= 1:
            continue
        grads = params * f("training.grad_bytes")
        op = "reduce-scatter" if par.zero else "all-reduce"
        t = ctx.comm_s(op, grads, ranks)
        hidden = min(t, window)
        window -= hidden
        out[f"{name}.{op}"] = dict(op=op, bytes=grads, count=1, seconds=t, exposed=t - hidden, overlapped=hidden,
                                   group=name)
        if par.zero:
            size = params * f("training.weight_bytes")
            ag = ctx.comm_s("all-gather", size, ranks)
            out[f"{name}.all-gather"] = dict(op="all-gather", bytes=size, count=1, seconds=ag, exposed=ag,
                                             overlapped=0.0, group=name)
    return out


def estimate_training(model: Union[str, ModelConfig], instance: Union[str, SystemModel] = "trn1.32xlarge", nodes: int = 1,
                      tp: int = 1, pp: int = 1, dp: Optional[int] = None, cp: int = 1, ep: int = 1, vp: int = 1,
                      sp: bool = False, zero: int = 0, lnc: Optional[int] = None, seq: int = 2048,
                      global_batch: Optional[int] = None, micro_batch: int = 1, recompute: str = "none",
                      precision: str = "bf16", sparsity: Optional[str] = None, costs: Optional[OpCosts] = None,
                      comm=None, hardware_file: Optional[str] = None, overrides: Optional[Mapping] = None,
                      efficiency: Optional[Mapping[str, float]] = None, check_memory: bool = True
                      ) -> TrainingEstimate:
    """Estimate one training step (AdamW, bf16 autocast, fp32 master weights) on ``nodes`` x ``instance``
    (any system key: a Trainium instance or UltraServer, a GPU system; or a ``SystemModel``)."""
    t0 = time.perf_counter()
    check_params(model=model, instance=instance, nodes=nodes, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, zero=zero,
                 lnc=lnc, seq=seq, global_batch=global_batch, micro_batch=micro_batch, recompute=recompute,
                 precision=precision, sparsity=sparsity)
    ctx = make_context(model, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file, efficiency)
    cfg, system = ctx.cfg, ctx.system
    par = resolve(Parallel(tp=tp, pp=pp, dp=dp or 0, cp=cp, ep=ep, vp=vp, sp=sp, zero=zero), cfg, system)
    global_batch = global_batch or par.dp * micro_batch
    m = check_batch(par, seq, global_batch, micro_batch)
    overrides = {**system.memory_overrides(), **(overrides or {})}
    f = lambda k: float(figure("estimator", k, overrides))  # noqa: E731
    hbm = float(system.hbm_bytes_per_core)
    mem = training_memory(cfg, par, micro_batch, seq, recompute, hbm, overrides)
    if check_memory and not mem.fits:
        # the layouts that fit instead come from the planner a layer up (trnsim.api adds them)
        raise fit_error(mem, [], f"training {cfg.name} on {system.key} with tp={par.tp} pp={par.pp} dp={par.dp} "
                        f"zero={par.zero}", system.rank_name)

    lay = ctx.layout(par, act_bytes=f("training.activation_bytes"), weight_bytes=f("training.weight_bytes"))
    p_local = params_per_core(cfg, par)
    graph = training_graph(cfg, lay, micro_batch, seq, recompute)
    sec = ctx.costing.seconds
    phase = graph.by_phase(sec)
    fwd, bwd = phase.get("forward", 0.0), phase.get("backward", 0.0)
    rec, head = phase.get("recompute", 0.0), phase.get("head", 0.0)
    colls = _collectives(ctx, par, micro_batch, seq, recompute, f("training.activation_bytes"))
    comm_mb = sum(c["seconds"] for c in colls.values())
    per_mb = fwd + bwd + rec + head + comm_mb
    pipeline = m * per_mb
    bubble = (par.pp - 1) / par.vp * per_mb

    p_expert = expert_params_per_core(cfg, par)
    dp_comm = _dp_reduction(ctx, par, p_local - p_expert, p_expert, f("training.dp_overlap_fraction") * bwd, f)
    dp_exposed = sum(c["exposed"] for c in dp_comm.values())
    edp = max(1, par.dp // par.ep)
    opt_params = ((p_local - p_expert) / par.dp + p_expert / edp) if par.zero else p_local
    opt = optimizer_graph(opt_params, f("training.optimizer_hbm_bytes_per_param")).time(sec)
    step = pipeline + bubble + dp_exposed + opt

    kinds: Dict[str, Dict] = {}
    for c in colls.values():   # TP/SP/CP/EP/PP collectives sit on the critical path, once per micro-batch
        c.update(seconds=c["seconds"] * m, exposed=c["seconds"] * m, overlapped=0.0)
        add_collective(kinds, c["op"], c["count"] * m, c["seconds"], c["bytes"] * c["count"] * m)
    for c in dp_comm.values():
        add_collective(kinds, c["op"], c["count"], c["seconds"], c["bytes"] * c["count"])
    comm_all = {**colls, **dp_comm}
    tokens = global_batch * seq
    model_flops = _model_flops(cfg, seq) * tokens
    hw_flops = model_flops + (graph.flops("recompute") * m * par.tp * par.cp * par.pp * par.dp)
    peak = system.peak_flops_per_rank(ctx.prec)
    mfu = model_flops / (step * system.cores * peak)
    breakdown = {"forward": fwd * m, "backward": bwd * m, "recompute": rec * m, "embedding_and_head": head * m,
                 "optimizer": opt, "pipeline_bubble": bubble,
                 "comm_exposed": sum(c["exposed"] for c in comm_all.values()),
                 "comm_overlapped": sum(c["overlapped"] for c in comm_all.values())}
    band = ctx.calib.band("train")
    notes = [n for n in (ctx.prec.note, ctx.calib.note) if n]
    notes.append(f"collectives timed by {ctx.comm_name}")
    return TrainingEstimate(
        model=cfg.name, instance=system.key, nodes=system.nodes, lnc=system.lnc, cores=system.cores,
        parallel=par.to_dict(), precision=ctx.prec.name, seq=seq, global_batch=global_batch,
        micro_batch=micro_batch, micro_batches=m, recompute=recompute, step_time_s=step,
        seq_per_s=global_batch / step, tokens_per_s=tokens / step, mfu=mfu,
        hfu=hw_flops / (step * system.cores * peak), model_flops_per_step=model_flops,
        memory_per_core_gib=mem.total / GIB, memory=mem.to_dict(), breakdown=breakdown, comm=comm_all,
        error_band={"step_time_s": band, "seq_per_s": band, "tokens_per_s": band, "mfu": band},
        calibration_rows=ctx.calib.rows, ops_by_how=ctx.costing.ops_by_how(),
        sim_seconds=time.perf_counter() - t0, notes=tuple(notes), collectives=kinds)


def _model_flops(cfg: ModelConfig, seq: int) -> float:
    """Model FLOPs per token of a training step: 6 x active non-embedding parameters (+ LM head) plus
    the attention score and value products (x 3 for forward + backward), no recompute."""
    from .params import count_params
    pc = count_params(cfg)
    dense = 6.0 * (pc.active - pc.embedding + (cfg.vocab * cfg.hidden if cfg.tied_embeddings else 0))
    if cfg.is_mla:
        hd_sum = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim
    else:
        hd_sum = 2 * cfg.hd
    frac = 0.5 if cfg.causal else 1.0
    # forward + backward (x3) of the two attention matmuls (QK^T, PV) at 2 FLOPs per multiply-add
    attn = 3.0 * 2.0 * cfg.layers * cfg.heads * hd_sum * seq * frac
    return dense + attn
