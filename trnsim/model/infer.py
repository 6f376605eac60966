"""Inference estimate: prefill (TTFT) and decode (TPOT) of a batch over TP x PP (x EP) cores, the KV cache,
the chips a model needs in a given weight format, and optionally a served request mix."""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Mapping, Optional, Union

from ..checks import check_params
from .colltable import CollectiveTable, scaled
from .config import ModelConfig
from .context import Context, make_context
from .datafiles import figure
from .deploy import chunked_prefill, kv_formats, replica_layout, serving_note, serving_options
from .memory import GIB, fit_error, inference_memory
from .ops import OpCosts
from .neuron import ServingSetup, check_setup, decode_batch, prefill_len
from .parallel import Parallel, ParallelError
from .results import InferenceEstimate
from .step import StepTimes, draft_config, step_seconds
from .system import SystemModel
from .transformer import inference_graph


__all__ = ["chips_needed", "estimate_inference", "step_seconds"]


def chips_needed(cfg: ModelConfig, weight_bytes: float, ctx: Context, batch: int, ctx_len: int,
                 kv_bytes: float = 0.0) -> int:
    """Fewest chips (GPUs) whose HBM holds the weights, the KV cache and each rank's runtime reserve."""
    from .memory import kv_cache_bytes
    from .params import count_params
    weights = count_params(cfg).total * weight_bytes
    kv = kv_cache_bytes(cfg, Parallel(), batch, ctx_len, kv_bytes or float(figure("estimator", "inference.kv_bytes")))
    reserved = float(figure("estimator", "memory.reserved_bytes_per_core", ctx.system.memory_overrides()))
    return max(1, math.ceil((weights + kv) / ctx.system.usable_chip_bytes(reserved)))


def estimate_inference(model: Union[str, ModelConfig], instance: Union[str, SystemModel] = "trn2.48xlarge", nodes: int = 1,
                       tp: int = 1, pp: int = 1, ep: int = 1, sp: bool = False, lnc: Optional[int] = None,
                       batch: int = 1,
                       input_len: int = 128, output_len: int = 128, precision: str = "bf16",
                       sparsity: Optional[str] = None, costs: Optional[OpCosts] = None, comm=None,
                       hardware_file: Optional[str] = None, rate: Optional[float] = None,
                       input_dist: Optional[str] = None, output_dist: Optional[str] = None,
                       requests: int = 200, max_batch: Optional[int] = None, seed: int = 0,
                       efficiency: Optional[Mapping[str, float]] = None, check_memory: bool = True,
                       kv_dtype: Optional[str] = None, framework: Optional[str] = None, attention_dp: int = 1,
                       replicas: int = 1, concurrency: Optional[int] = None,
                       serving: Optional[ServingSetup] = None, scenario: Optional[str] = None,
                       ttft_limit_ms: float = 2000.0, tpot_limit_ms: float = 200.0) -> InferenceEstimate:
    """TTFT, TPOT and output tokens/s of ``batch`` requests (``input_len`` prompt, ``output_len`` new tokens)
    served by one replica of tp x pp (x ep) ranks of any system (a Trainium instance or UltraServer, a GPU
    system); with ``rate``, continuous batching of a request mix. Serving as deployed: ``framework``
    (GPUs: trtllm, the default, vllm, sglang; Trainium: nxdi), ``kv_dtype`` (bf16 | fp8 | fp4; default the
    framework's), ``attention_dp`` > 1 (attention over tp / attention_dp ranks, experts over ``ep``),
    ``replicas`` copies of the replica sharing the load (output tokens/s counts them all). On Neuron devices
    the model runs as the Neuron stack compiles it (``serving``: sequence and batch buckets, compiled batch,
    fixed costs per launch); on every system ``serving`` also sets prefix caching, chunked prefill and
    speculative decoding. ``concurrency`` (closed loop: N users), ``rate`` (open loop) or ``scenario`` (MLPerf
    "offline" / "server" under ``ttft_limit_ms`` / ``tpot_limit_ms`` at p99) simulate a request mix."""
    t0 = time.perf_counter()
    check_params(model=model, instance=instance, nodes=nodes, tp=tp, pp=pp, ep=ep, lnc=lnc, batch=batch,
                 input_len=input_len, output_len=output_len, rate=rate, requests=requests, max_batch=max_batch,
                 seed=seed, concurrency=concurrency, precision=precision, sparsity=sparsity, comm=comm)
    setup = serving or ServingSetup()
    check_setup(setup)
    ctx = make_context(model, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file, efficiency,
                       training=False)
    cfg, system = ctx.cfg, ctx.system
    if min(batch, input_len, output_len) < 1:
        raise ParallelError("batch, input and output lengths must be positive", rule="batch", limit=">= 1",
                            value=min(batch, input_len, output_len))
    gpu = system.rank_name == "GPU"
    fw, kv, kvb = serving_options(framework or ("trtllm" if gpu else None), kv_dtype, ctx.prec.name,
                                  kv_formats(system), "gpu" if gpu else "trainium")
    par = replica_layout(cfg, system, tp, pp, ep, sp, attention_dp, pad_heads=True)
    if replicas < 1 or tp * pp * replicas > system.cores:
        unit = f"logical NeuronCores at LNC={system.lnc}" if system.rank_name == "NeuronCore" else "GPUs"
        raise ParallelError(f"tp x pp x replicas = {tp * pp * replicas} exceeds the {system.cores} {unit} of "
                            f"{system.nodes} x {system.key}", rule="parallel-cores",
                            limit=system.cores, value=tp * pp * replicas)
    ctx_len = input_len + output_len
    mem = inference_memory(cfg, par, batch, ctx_len, ctx.prec.weight_bytes, float(system.hbm_bytes_per_core),
                           prompt=input_len, overrides=system.memory_overrides(), kv_bytes=kvb or None,
                           framework=fw, attention_dp=attention_dp)
    need = chips_needed(cfg, ctx.prec.weight_bytes, ctx, batch, ctx_len, kvb)
    if check_memory and not mem.fits:
        # a larger layout that fits comes from the planner a layer up (trnsim.api adds it first)
        sugg = ["--precision fp8"] if ctx.prec.name == "bf16" else []
        if kv == "bf16" and "fp8" in kv_formats(system) and (fw is None or "fp8" in fw.kv_formats):
            sugg.append("--kv-dtype fp8")
        raise fit_error(mem, sugg + [f"at least {need} {'GPUs' if gpu else 'chips'}"],
                        f"serving {cfg.name} on {system.key} (batch {batch}, context {ctx_len}, {kv} KV cache"
                        + (f", {fw.name}" if fw else "") + f") with tp={tp} pp={pp}"
                        + (f" attention-dp={attention_dp}" if attention_dp > 1 else ""), system.rank_name)
    opts = dict(kv_bytes=kvb, attention_dp=attention_dp, step_overhead_s=fw.step_overhead_s if fw else 0.0)
    mb = int(max_batch or setup.max_batch or (batch if not (rate or concurrency or scenario) else
                                                  figure("estimator", "inference.max_batch")))
    setup = replace(setup, max_batch=mb, prefill_batch=setup.prefill_batch or
                    int(setup.fig("buckets.prefill_batch")))
    draft_ctx = None
    if setup.spec.on:
        dcfg = draft_config(cfg, int(setup.fig("speculation.eagle_draft_layers"))) \
            if setup.spec.kind == "eagle" else setup.spec.draft_model
        draft_ctx = make_context(dcfg, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file,
                                 efficiency, training=False)
    st = StepTimes(ctx, par, setup, ctx_len, draft_ctx, opts)
    setup = st.setup
    if st.neuron:   # a batch's prompts: ceil(batch / prefill batch) context-encoding calls, each its bucket
        pb = min(batch, setup.prefill_batch)
        prefill = dict(st.prefill(input_len, pb))
        calls = math.ceil(batch / pb)
        prefill = dict(prefill, total=calls * prefill["total"], compute=calls * prefill["compute"],
                       comm=calls * prefill["comm"], overhead=calls * prefill["overhead"],
                       groups=scaled(prefill["groups"], calls),
                       collectives={k: scaled(c, calls) for k, c in prefill["collectives"].items()})
    else:
        prefill = chunked_prefill(lambda b, q, k: step_seconds(ctx, par, b, q, k, False, None, **opts), batch,
                                  input_len, fw.prefill_chunk_tokens * attention_dp if fw else 0)
    # the step at the mean context of the generation (the KV cache grows from input to input + output)
    decode = dict(st.decode(batch, input_len + output_len // 2))
    steps = max(1, math.ceil((output_len - 1) / st.tokens_per_step))
    # Neuron: the mean over the KV buckets the generation passes through; exact shapes: the mean context
    step_s = st.mean_decode(batch, input_len, steps) if setup.bucketing else decode["total"]
    request_s = fw.request_overhead_s if fw else 0.0
    ttft, tpot = prefill["total"] + request_s, step_s / st.tokens_per_step
    serving_est = None
    if rate or concurrency or scenario:
        from .serving import Workload, mlperf, simulate
        w = Workload(mode="closed" if concurrency else "open", rate=float(rate or 0.0),
                     concurrency=int(concurrency or 0), requests=requests, input_dist=input_dist or str(input_len),
                     output_dist=output_dist or str(output_len), seed=seed,
                     stagger=str(setup.fig("closed_loop.stagger")),
                     warmup=int(setup.fig("closed_loop.warmup_per_user")),
                     cooldown=bool(setup.fig("closed_loop.cooldown")),
                     draws=int(setup.fig("closed_loop.phase_draws")))
        if scenario:
            serving_est = mlperf(st, scenario, w, mb, setup.prefill_batch, setup.chunk, ttft_limit_ms,
                                 tpot_limit_ms)
        else:
            serving_est = simulate(st, w, mb, setup.prefill_batch, setup.chunk)
    notes = [n for n in (ctx.prec.note, ctx.calib.note) if n]
    notes.append(f"collectives timed by {ctx.comm_name}")
    if fw or kv_dtype:
        notes.insert(0, serving_note(fw, kv, kv_dtype is None))
    b_ttft, b_tpot = ctx.calib.band("ttft"), ctx.calib.band("tpot")
    if decode_batch(setup, batch) != batch:
        notes.append(f"decode runs padded to the compiled batch of {decode_batch(setup, batch)}")
    if setup.spec.on:
        notes.append(f"speculative decoding ({setup.spec.kind}, {setup.spec.tokens} tokens, acceptance "
                     f"{setup.spec.acceptance:g}): {st.tokens_per_step:.2f} tokens per target step")
    if cfg.heads % tp or (cfg.n_kv % tp and tp % cfg.n_kv):
        notes.append(f"tp={tp} does not divide the {cfg.heads} attention / {cfg.n_kv} KV heads: heads padded "
                     "to a multiple of tp (as Neuron serves them)")
    return InferenceEstimate(
        model=cfg.name, instance=system.key, nodes=system.nodes, lnc=system.lnc, cores=tp * pp * replicas,
        parallel=dict(tp=tp, pp=pp, ep=ep, sp=sp, attention_dp=attention_dp, replicas=replicas),
        precision=ctx.prec.name, batch=batch, input_len=input_len, output_len=output_len, ttft_ms=ttft * 1e3,
        tpot_ms=tpot * 1e3, output_tokens_per_s=replicas * batch / tpot,
        memory_per_core_gib=mem.total / GIB, kv_cache_gib=mem.kv_cache / GIB, memory=mem.to_dict(),
        chips_needed=need,
        breakdown={"prefill_compute_ms": prefill["compute"] * 1e3, "prefill_comm_ms": (prefill["comm"] +
                   prefill["p2p"]) * 1e3, "decode_weights_ms": decode["parts"]["weights"] * 1e3,
                   "decode_kv_ms": decode["parts"]["kv"] * 1e3, "decode_compute_ms": decode["parts"]["compute"] * 1e3,
                   "decode_comm_ms": (decode["comm"] + decode["p2p"]) * 1e3,
                   "prefill_overhead_ms": (prefill["overhead"] + request_s) * 1e3,
                   "decode_overhead_ms": decode["overhead"] * 1e3,
                   "prefill_tokens": prefill_len(setup, input_len, ctx_len),
                   "decode_batch": decode_batch(setup, batch), "decode_step_ms": step_s * 1e3,
                   "tokens_per_step": st.tokens_per_step},
        collectives={"prefill": prefill["collectives"], "decode": decode["collectives"]},
        collective_table={"prefill": CollectiveTable(st.ctx, prefill.get("groups")),
                          "decode": CollectiveTable(st.ctx, decode.get("groups"))},
        error_band={"ttft_ms": b_ttft, "tpot_ms": b_tpot, "output_tokens_per_s": b_tpot},
        calibration_rows=ctx.calib.rows, ops_by_how=ctx.costing.ops_by_how(),
        sim_seconds=time.perf_counter() - t0, serving=serving_est, notes=tuple(notes),
        framework=dict(fw.to_dict() if fw else {}, kv_dtype=kv,
                       kv_bytes=kvb or float(figure("estimator", "inference.kv_bytes"))))
