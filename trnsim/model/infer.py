"""Inference estimate: prefill (TTFT) and decode (TPOT) of a batch over TP x PP (x EP) cores, the KV cache,
the chips a model needs in a given weight format, and optionally a served request mix."""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Mapping, Optional, Union

from ..checks import check_params
from .config import ModelConfig
from .context import Context, make_context
from .datafiles import figure
from .deploy import chunked_prefill, kv_formats, replica_layout, serving_note, serving_options
from .memory import GIB, fit_error, inference_memory
from .ops import OpCosts
from .parallel import Parallel, ParallelError, group_ranks
from .results import InferenceEstimate
from .system import SystemModel
from .transformer import inference_graph


def step_seconds(ctx: Context, par: Parallel, batch: int, q: int, kv: int, decode: bool, kv_bytes: float = 0.0,
                 attention_dp: int = 1, step_overhead_s: float = 0.0) -> dict:
    """One forward pass (prefill of q tokens, or one decode step) through all stages: compute + comm.

    ``kv_bytes``: KV-cache element size attention reads (0: activation width). ``attention_dp`` > 1: attention
    runs data-parallel over that many groups of tp / attention_dp ranks (each with its own sequences) and the
    experts are spread over all ``par.ep`` ranks, tokens reaching them by all-to-all. ``step_overhead_s``: the
    serving framework's fixed cost per forward step."""
    cfg = ctx.cfg
    a = float(figure("estimator", "inference.activation_bytes"))
    adp = max(1, int(attention_dp))
    lay = replace(ctx.layout(par, act_bytes=a), ep_in_tp=adp == 1, kv_bytes=kv_bytes, tp=max(1, par.tp // adp))
    if decode and lay.sp:   # one token per sequence: nothing to split along the sequence
        lay = replace(lay, sp=False)
    b = -(-batch // adp)
    graph = inference_graph(cfg, lay, b, q, kv, decode)
    compute = graph.time(ctx.costing.seconds)
    layers = cfg.layers / par.pp
    T = b * q
    comm = 0.0
    tally: dict = {}
    if lay.tp > 1:   # two all-reduces per layer (after attention and after the MLP), one for the embedding
        ranks, size = group_ranks(par, "tp")[:lay.tp], T * cfg.hidden * a
        # sequence parallel prefill: each all-reduce becomes RS + AG; every stage runs its own
        ops = ("reduce-scatter", "all-gather") if par.sp and not decode else ("all-reduce",)
        comm = sum(ctx.charge(op, size, ranks, par.pp * (2 * layers + 1), tally) for op in ops) / par.pp
    if adp > 1 and cfg.is_moe and par.ep > 1:   # dispatch to the experts' ranks and combine back
        calls = 2 * cfg.moe_layers
        comm += ctx.charge("all-to-all", T * cfg.top_k * cfg.hidden * a, list(range(par.ep)), calls, tally) / par.pp
    # without attention DP the experts are spread over the TP group, which already shares the tokens: the MoE
    # output joins the layer's all-reduce, no all-to-all is needed
    p2p = ctx.charge("send-recv", T * cfg.hidden * a, group_ranks(par, "pp"), par.pp - 1, tally) \
        if par.pp > 1 else 0.0
    stage = compute + comm
    parts = {k: par.pp * v for k, v in ctx.costing.parts(graph).items()}
    return dict(total=par.pp * stage + p2p + step_overhead_s, compute=par.pp * compute, comm=par.pp * comm,
                p2p=p2p, stage=stage, parts=parts, collectives=tally, overhead=step_overhead_s)


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
                       replicas: int = 1) -> InferenceEstimate:
    """TTFT, TPOT and output tokens/s of ``batch`` requests (``input_len`` prompt, ``output_len`` new tokens)
    served by one replica of tp x pp (x ep) ranks of any system (a Trainium instance or UltraServer, a GPU
    system); with ``rate``, continuous batching of a request mix. Serving as deployed: ``framework``
    (GPUs: trtllm, the default, vllm, sglang; Trainium: nxdi), ``kv_dtype`` (bf16 | fp8 | fp4; default the
    framework's), ``attention_dp`` > 1 (attention over tp / attention_dp ranks, experts over ``ep``),
    ``replicas`` copies of the replica sharing the load (output tokens/s counts them all)."""
    t0 = time.perf_counter()
    check_params(nodes=nodes, tp=tp, pp=pp, ep=ep, batch=batch, input_len=input_len, output_len=output_len,
                 rate=rate, requests=requests, max_batch=max_batch, seed=seed)
    ctx = make_context(model, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file, efficiency,
                       training=False)
    cfg, system = ctx.cfg, ctx.system
    if min(batch, input_len, output_len) < 1:
        raise ParallelError("batch, input and output lengths must be positive", rule="batch", limit=">= 1",
                            value=min(batch, input_len, output_len))
    gpu = system.rank_name == "GPU"
    fw, kv, kvb = serving_options(framework or ("trtllm" if gpu else None), kv_dtype, ctx.prec.name,
                                  kv_formats(system), "gpu" if gpu else "trainium")
    par = replica_layout(cfg, system, tp, pp, ep, sp, attention_dp)
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
    prefill = chunked_prefill(lambda b, q, k: step_seconds(ctx, par, b, q, k, decode=False, **opts), batch,
                              input_len, fw.prefill_chunk_tokens * attention_dp if fw else 0)   # a budget per DP rank
    # TPOT at the mean context of the generation (the KV cache grows from input to input + output)
    decode = step_seconds(ctx, par, batch, 1, input_len + output_len // 2, decode=True, **opts)
    request_s = fw.request_overhead_s if fw else 0.0
    ttft, tpot = prefill["total"] + request_s, decode["total"]
    serving = None
    if rate:
        from .serving import simulate_serving
        serving = simulate_serving(ctx, par, rate, input_dist or str(input_len), output_dist or str(output_len),
                                   requests, int(max_batch or figure("estimator", "inference.max_batch")), seed,
                                   step_seconds=step_seconds)
    notes = [n for n in (ctx.prec.note, ctx.calib.note) if n]
    notes.append(f"collectives timed by {ctx.comm_name}")
    if fw or kv_dtype:
        notes.insert(0, serving_note(fw, kv, kv_dtype is None))
    b_ttft, b_tpot = ctx.calib.band("ttft"), ctx.calib.band("tpot")
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
                   "decode_overhead_ms": decode["overhead"] * 1e3},
        collectives={"prefill": prefill["collectives"], "decode": decode["collectives"]},
        error_band={"ttft_ms": b_ttft, "tpot_ms": b_tpot, "output_tokens_per_s": b_tpot},
        calibration_rows=ctx.calib.rows, ops_by_how=ctx.costing.ops_by_how(),
        sim_seconds=time.perf_counter() - t0, serving=serving, notes=tuple(notes),
        framework=dict(fw.to_dict() if fw else {}, kv_dtype=kv,
                       kv_bytes=kvb or float(figure("estimator", "inference.kv_bytes"))))
