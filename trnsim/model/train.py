"""Training step estimate: compute per micro-batch from the op graph, TP/SP/CP/EP collectives on the
critical path, 1F1B pipeline with its bubble, DP gradient reduction (ZeRO-1 or all-reduce) partly hidden
under the backward pass, and the AdamW step."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Sequence, Union

from ..checks import check_params
from .colltable import CollectiveTable, add_group, scaled
from .config import ModelConfig
from .context import Context, add_collective, make_context
from .datafiles import figure
from .train_frameworks import check_zero, defaults_note, get_framework
from .lora import adapter_params_total, make_lora
from .memory import (GIB, adapter_params_per_core, expert_params_per_core, fit_error, params_per_core, shard_degree,
                     training_memory)
from .ops import OpCosts
from .parallel import Parallel, ParallelError, check_batch, expert_groups, group_ranks, resolve
from .system import SystemModel
from .results import TrainingEstimate
from .transformer import optimizer_graph, training_graph


def _collectives(ctx: Context, par: Parallel, micro_batch: int, seq: int, recompute: str, a: float,
                 groups: Optional[dict] = None) -> Dict[str, Dict]:
    """Per-micro-batch collectives of one pipeline stage: name -> {op, bytes, count (per micro-batch),
    seconds}; each also counted per (op, size, group) in ``groups``."""
    cfg = ctx.cfg
    T = micro_batch * seq / par.cp
    layers = cfg.layers / par.pp
    fwd_passes = 2 if recompute == "full" else 1     # full recompute re-runs the forward collectives
    out: Dict[str, Dict] = {}

    def add(name, op, size, count, kind):
        ranks = expert_groups(par)[0] if kind == "ep" else group_ranks(par, kind)
        t = ctx.comm_s(op, size, ranks)
        if t > 0:
            out[name] = dict(op=op, bytes=size, count=count, seconds=t * count, group=kind)
            if groups is not None:
                add_group(groups, op, size, ranks, count)

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
        # with the experts over the TP ranks too (expert TP 1), each TP rank dispatches its share of the tokens
        size = T * cfg.top_k * cfg.hidden * a / (par.tp if par.etp < par.tp else 1)
        add("ep.all-to-all", "all-to-all", size, 2 * cfg.moe_layers / par.pp * (fwd_passes + 1), "ep")
    if par.pp > 1:
        size = T * cfg.hidden * a / (par.tp if par.sp else 1)
        add("pp.send-recv", "send-recv", size, 2 * par.vp, "pp")   # activation forward, gradient back, per chunk
    return out


def _shard_ranks(par: Parallel, over_cp: bool) -> List[int]:
    """Ranks holding the same dense weights: the dp group, with its cp ranks when they share the sharding."""
    dp = group_ranks(par, "dp")
    if par.cp == 1 or not over_cp:
        return dp
    return sorted(r + c for r in dp for c in group_ranks(par, "cp"))


def _dp_reduction(ctx: Context, par: Parallel, p_dense: float, p_expert: float, window: float, f,
                  over_cp: bool = False, grad_bytes: Optional[float] = None,
                  record: Optional[dict] = None) -> Dict:
    """DP gradient reduction per step: dense parameters over all dp (x cp) ranks, routed experts over the
    dp / ep ranks holding the same experts. The reduce (all-reduce, or ZeRO's reduce-scatter) hides under
    ``window`` seconds of the last backward pass; ZeRO-1/2's parameter all-gather after the step does not
    (ZeRO-3 gathers weights before each use instead, costed in ``_zero3_gathers``). Each collective is
    also counted per (op, size, group) in ``record``."""
    out: Dict[str, Dict] = {}
    groups = (("dp", p_dense, _shard_ranks(par, over_cp)), ("edp", p_expert, expert_groups(par)[1]))
    gb = f("training.grad_bytes") if grad_bytes is None else grad_bytes
    for name, params, ranks in groups:
        if params <= 0 or len(ranks) <= 1:
            continue
        grads = params * gb
        op = "reduce-scatter" if par.zero else "all-reduce"
        t = ctx.comm_s(op, grads, ranks)
        if record is not None:
            add_group(record, op, grads, ranks, 1)
        hidden = min(t, window)
        window -= hidden
        out[f"{name}.{op}"] = dict(op=op, bytes=grads, count=1, seconds=t, exposed=t - hidden, overlapped=hidden,
                                   group=name)
        if par.zero in (1, 2):
            size = params * f("training.weight_bytes")
            ag = ctx.comm_s("all-gather", size, ranks)
            if record is not None:
                add_group(record, "all-gather", size, ranks, 1)
            out[f"{name}.all-gather"] = dict(op="all-gather", bytes=size, count=1, seconds=ag, exposed=ag,
                                             overlapped=0.0, group=name)
    return out


def _zero3_gathers(ctx: Context, par: Parallel, p_dense: float, m: int, window: float, f, over_cp: bool,
                   record: Optional[dict] = None) -> Dict:
    """ZeRO-3 / FSDP: every micro-batch gathers the stage's weights before its forward and again before its
    backward, prefetched under ``window`` seconds of compute (counted per (op, size, group) in ``record``)."""
    ranks = _shard_ranks(par, over_cp)
    if par.zero < 3 or len(ranks) <= 1 or p_dense <= 0:
        return {}
    size = p_dense * f("training.weight_bytes")
    t = ctx.comm_s("all-gather", size, ranks) * 2 * m
    if record is not None and t > 0:
        add_group(record, "all-gather", size, ranks, 2 * m)
    hidden = min(t, window)
    return {"zero3.all-gather": dict(op="all-gather", bytes=size, count=2 * m, seconds=t, exposed=t - hidden,
                                     overlapped=hidden, group="dp")}


ZERO_NAMES = {1: "--zero 1", 2: "--zero 2", 3: "--zero 3"}   # optimizer states / + gradients / + weights sharded


def _settings_that_fit(cfg: ModelConfig, par: Parallel, mb: int, seq: int, recompute: str, hbm: float, lora=None,
                       fw=None, overrides: Optional[Mapping] = None, mm_in: Optional[float] = None) -> List[str]:
    """Framework settings that make this very layout fit, fewest changes first: a higher ZeRO stage (sharding
    gradients, then weights), selective or full recompute.  Other layouts come from the planner (the api)."""
    found = []
    zeros = [z for z in (par.zero, 1, 2, 3) if z >= par.zero] if par.dp > 1 else [par.zero]
    for zero in sorted(set(zeros)):
        for rc in sorted({recompute, "selective", "full"}, key=lambda r: (r != recompute, r == "full")):
            cand = replace(par, zero=zero)
            if not training_memory(cfg, cand, mb, seq, rc, hbm, overrides, lora, fw, mm_in).fits:
                continue
            flags = [f for f, on in ((ZERO_NAMES.get(zero, ""), zero != par.zero),
                                     (f"--recompute {rc}", rc != recompute)) if on]
            if flags:
                found.append((len(flags), zero, " ".join(flags)))
    found.sort()
    return [f for *_, f in found[:2]]


def _framework_settings(fw, par: Parallel, sp, zero, recompute):
    """Fill the settings the user left as None with the framework's defaults; return them and which were
    chosen by the user (named in the estimate's notes)."""
    chosen = {"ZeRO": zero is not None, "sp": sp is not None, "recompute": recompute is not None}
    if zero is not None and (isinstance(zero, bool) or not isinstance(zero, int)):
        check_zero(zero)   # a FrameworkError naming the stages
    if sp is not None and not isinstance(sp, bool):
        raise ParallelError(f"sp must be true or false, got {sp!r}", rule="parallel-sp", limit=(True, False), value=sp)
    if zero is None:
        zero = fw.zero if par.dp > 1 else 0
    if sp is None:
        sp = fw.sp and par.tp > 1
    return check_zero(int(zero)), bool(sp), (recompute or fw.recompute), chosen


def estimate_training(model: Union[str, ModelConfig], instance: Union[str, SystemModel] = "trn1.32xlarge",
                      nodes: int = 1,
                      tp: int = 1, pp: int = 1, dp: Optional[int] = None, cp: int = 1, ep: int = 1, vp: int = 1,
                      sp: Optional[bool] = None, zero: Optional[int] = None, lnc: Optional[int] = None,
                      seq: int = 2048, global_batch: Optional[int] = None, micro_batch: int = 1,
                      recompute: Optional[str] = None,
                      precision: str = "bf16", sparsity: Optional[str] = None, costs: Optional[OpCosts] = None,
                      comm=None, hardware_file: Optional[str] = None, overrides: Optional[Mapping] = None,
                      efficiency: Optional[Mapping[str, float]] = None, check_memory: bool = True,
                      framework: Optional[str] = None, lora_rank: Optional[int] = None,
                      lora_targets: Union[None, str, Sequence[str]] = None) -> TrainingEstimate:
    """Estimate one training step (AdamW, bf16 autocast, fp32 master weights) on ``nodes`` x ``instance``
    (any system key: a Trainium instance or UltraServer, a GPU system; or a ``SystemModel``), laid out as
    ``framework`` lays it out (NeuronX Distributed by default on Trainium, Megatron on GPUs: ZeRO-1, sequence parallel,
    selective recompute, each switchable). ``lora_rank`` > 0: LoRA fine-tuning of a frozen base model."""
    t0 = time.perf_counter()
    check_params(model=model, instance=instance, nodes=nodes, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, zero=zero,
                 lnc=lnc, seq=seq, global_batch=global_batch, micro_batch=micro_batch, recompute=recompute,
                 precision=precision, sparsity=sparsity, comm=comm)
    ctx = make_context(model, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file, efficiency)
    cfg, system = ctx.cfg, ctx.system
    seq = 2048 if seq is None else seq                      # None: not given, the default
    micro_batch = 1 if micro_batch is None else micro_batch
    fw = get_framework(framework, gpu=system.rank_name != "NeuronCore", overrides=overrides)
    lora = make_lora(lora_rank, lora_targets)
    base = resolve(Parallel(tp=tp, pp=pp, dp=dp or 0, cp=cp, ep=ep, vp=vp, sp=False, zero=0), cfg, system)
    zero, sp, recompute, chosen = _framework_settings(fw, base, sp, zero, recompute)
    if sp and seq % (base.tp * base.cp) and not chosen["sp"]:
        sp = False     # the framework's default does not apply to this sequence length
    par = resolve(replace(base, sp=sp, zero=zero), cfg, system)
    global_batch = global_batch or par.dp * micro_batch
    m = check_batch(par, seq, global_batch, micro_batch)
    user = dict(overrides or {})
    overrides = {**system.memory_overrides(), **user}
    # the framework's reserve replaces the system's default one; a reserve the caller passes wins over both
    mem_over = {k: v for k, v in overrides.items() if k != "memory.reserved_bytes_per_core" or k in user}
    f = lambda k: float(figure("estimator", k, overrides))  # noqa: E731
    hbm = float(system.hbm_bytes_per_core)
    mm_in = f("training.fp8_matmul_input_bytes") if ctx.prec.name != "bf16" else None
    mem = training_memory(cfg, par, micro_batch, seq, recompute, hbm, mem_over, lora, fw, mm_in)
    escalated = ""
    if not mem.fits and not chosen["recompute"] and recompute != "full":
        # the recipes switch to full recompute when the default does not fit; say so rather than refuse
        full = training_memory(cfg, par, micro_batch, seq, "full", hbm, mem_over, lora, fw, mm_in)
        if full.fits:
            escalated, recompute, mem = recompute, "full", full
    if check_memory and not mem.fits:
        # other layouts that fit come from the planner a layer up (trnsim.api adds them); here the framework
        # settings that make this layout fit
        raise fit_error(mem, _settings_that_fit(cfg, par, micro_batch, seq, recompute, hbm, lora, fw, mem_over, mm_in),
                        f"training {cfg.name} on {system.key} with tp={par.tp} pp={par.pp} dp={par.dp} "
                        f"zero={par.zero}", system.rank_name)

    lay = ctx.layout(par, act_bytes=f("training.activation_bytes"), weight_bytes=f("training.weight_bytes"))
    p_local = params_per_core(cfg, par)
    graph = training_graph(cfg, lay, micro_batch, seq, recompute, lora, par.vp)
    sec = ctx.costing.seconds
    phase = graph.by_phase(sec)
    fwd, bwd = phase.get("forward", 0.0), phase.get("backward", 0.0)
    rec, head = phase.get("recompute", 0.0), phase.get("head", 0.0)
    mb_groups: dict = {}
    colls = _collectives(ctx, par, micro_batch, seq, recompute, f("training.activation_bytes"), mb_groups)
    comm_mb = sum(c["seconds"] for c in colls.values())
    per_mb = fwd + bwd + rec + head + comm_mb
    pipeline = m * per_mb
    bubble = (par.pp - 1) / par.vp * per_mb

    p_expert = expert_params_per_core(cfg, par)
    groups = scaled(mb_groups, m)   # per micro-batch collectives m times, the DP reduction once
    p_train, e_train = (adapter_params_per_core(cfg, par, lora), 0.0) if lora else (p_local, p_expert)
    window = f("training.dp_overlap_fraction") * bwd
    dp_comm = _dp_reduction(ctx, par, p_train - e_train, e_train, window, f, fw.shard_over_cp, fw.grad_bytes,
                            record=groups)
    dp_comm.update(_zero3_gathers(ctx, par, p_local - p_expert, m, f("training.dp_overlap_fraction")
                                  * (fwd + bwd) * m, f, fw.shard_over_cp, groups))
    dp_exposed = sum(c["exposed"] for c in dp_comm.values())
    d = shard_degree(par, fw.shard_over_cp)
    edp = max(1, (d * par.tp) // (par.ep * par.etp))
    opt_params = ((p_train - e_train) / d + e_train / edp) if par.zero else p_train
    opt = optimizer_graph(opt_params, f("training.optimizer_hbm_bytes_per_param")).time(sec)
    fixed = fw.step_cost_s(system.target)
    step = pipeline + bubble + dp_exposed + opt + fixed

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
                 "optimizer": opt, "pipeline_bubble": bubble, "fixed_step": fixed,
                 "comm_exposed": sum(c["exposed"] for c in comm_all.values()),
                 "comm_overlapped": sum(c["overlapped"] for c in comm_all.values())}
    band = ctx.calib.band("train")
    notes = [n for n in (ctx.prec.note, ctx.calib.note) if n]
    notes.append(defaults_note(fw, par.zero, par.sp, recompute, chosen))
    if escalated:
        notes.append(f"{fw.label}'s default {escalated} recompute does not fit; full recompute is used "
                     f"(choose with --recompute)")
    if fixed:
        notes.append(f"fixed per-step cost {fixed:.2f} s ({fw.label} on {system.target}; train_frameworks.toml)")
    if lora:
        notes.append(f"LoRA r={lora.rank} on {','.join(lora.targets)}: base weights frozen, "
                     f"{adapter_params_total(cfg, lora):,.0f} trainable parameters; MFU counts 6 x all "
                     "parameters as for full training")
    notes.append(f"collectives timed by {ctx.comm_name}")
    par_d = par.to_dict()
    par_d.update(framework=fw.name, lora=lora.to_dict() if lora else None)
    return TrainingEstimate(
        model=cfg.name, instance=system.key, nodes=system.nodes, lnc=system.lnc, cores=system.cores,
        parallel=par_d, precision=ctx.prec.name, seq=seq, global_batch=global_batch,
        micro_batch=micro_batch, micro_batches=m, recompute=recompute, step_time_s=step,
        seq_per_s=global_batch / step, tokens_per_s=tokens / step, mfu=mfu,
        hfu=hw_flops / (step * system.cores * peak), model_flops_per_step=model_flops,
        memory_per_core_gib=mem.total / GIB, memory=mem.to_dict(), breakdown=breakdown, comm=comm_all,
        error_band={"step_time_s": band, "seq_per_s": band, "tokens_per_s": band, "mfu": band},
        calibration_rows=ctx.calib.rows, ops_by_how=ctx.costing.ops_by_how(),
        sim_seconds=time.perf_counter() - t0, notes=tuple(notes), collectives=kinds,
        collective_table=CollectiveTable(ctx, groups))


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
