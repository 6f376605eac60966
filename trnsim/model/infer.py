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
from .memory import GIB, fit_error, inference_memory
from .neuron import ServingSetup, check_setup, decode_batch, prefill_len
from .ops import OpCosts
from .parallel import Parallel, ParallelError, resolve
from .results import InferenceEstimate
from .step import StepTimes, draft_config, step_seconds
from .system import SystemModel

__all__ = ["chips_needed", "estimate_inference", "step_seconds"]


def chips_needed(cfg: ModelConfig, weight_bytes: float, ctx: Context, batch: int, ctx_len: int) -> int:
    """Fewest chips (GPUs) whose HBM holds the weights, the KV cache and each rank's runtime reserve."""
    from .memory import kv_cache_bytes
    from .params import count_params
    weights = count_params(cfg).total * weight_bytes
    kv = kv_cache_bytes(cfg, Parallel(), batch, ctx_len, float(figure("estimator", "inference.kv_bytes")))
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
                       concurrency: Optional[int] = None, serving: Optional[ServingSetup] = None,
                       scenario: Optional[str] = None, ttft_limit_ms: float = 2000.0,
                       tpot_limit_ms: float = 200.0) -> InferenceEstimate:
    """TTFT, TPOT and output tokens/s of ``batch`` requests (``input_len`` prompt, ``output_len`` new tokens)
    served by one replica of tp x pp (x ep) ranks of any system (a Trainium instance or UltraServer, a GPU
    system), as its serving stack runs it (``serving``: Neuron buckets and compiled batch, prefix cache,
    chunked prefill, speculation). With ``rate`` (open loop), ``concurrency`` (closed loop: N users) or
    ``scenario`` (MLPerf "offline" / "server"), a request mix is simulated."""
    t0 = time.perf_counter()
    check_params(nodes=nodes, tp=tp, pp=pp, ep=ep, batch=batch, input_len=input_len, output_len=output_len,
                 rate=rate, requests=requests, max_batch=max_batch, seed=seed, concurrency=concurrency)
    setup = serving or ServingSetup()
    check_setup(setup)
    ctx = make_context(model, instance, nodes, lnc, precision, sparsity, costs, comm, hardware_file, efficiency,
                       training=False)
    cfg, system = ctx.cfg, ctx.system
    if min(batch, input_len, output_len) < 1:
        raise ParallelError("batch, input and output lengths must be positive", rule="batch", limit=">= 1",
                            value=min(batch, input_len, output_len))
    if ep > 1 and tp % ep:
        raise ParallelError(f"ep={ep} must divide tp={tp} (serving spreads the experts over the TP group)",
                            rule="parallel-ep-tp", limit=f"a divisor of {tp}", value=ep)
    # EP reuses the TP ranks when serving; resolve checks it against the experts as if over dp = ep
    par = resolve(Parallel(tp=tp, pp=pp, dp=ep, ep=ep, sp=sp), cfg, system, ranks=tp * pp * ep, pad_heads=True)
    par = replace(par, dp=1)
    if tp * pp > system.cores:
        unit = f"logical NeuronCores at LNC={system.lnc}" if system.rank_name == "NeuronCore" else "GPUs"
        raise ParallelError(f"tp x pp = {tp * pp} exceeds the {system.cores} {unit} of "
                            f"{system.nodes} x {system.key}", rule="parallel-cores",
                            limit=system.cores, value=tp * pp)
    ctx_len = input_len + output_len
    mem = inference_memory(cfg, par, batch, ctx_len, ctx.prec.weight_bytes, float(system.hbm_bytes_per_core),
                           prompt=input_len, overrides=system.memory_overrides())
    need = chips_needed(cfg, ctx.prec.weight_bytes, ctx, batch, ctx_len)
    if check_memory and not mem.fits:
        sugg = [f"--tp {t}" for t in (tp * 2, tp * 4) if t <= system.cores and cfg.heads % t == 0][:1]
        if ctx.prec.name == "bf16":
            sugg.append("--precision fp8")
        raise fit_error(mem, sugg + [f"at least {need} {'GPUs' if system.rank_name == 'GPU' else 'chips'}"],
                        f"serving {cfg.name} on {system.key} (batch {batch}, context {ctx_len}) with tp={tp} "
                        f"pp={pp}", system.rank_name)
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
    st = StepTimes(ctx, par, setup, ctx_len, draft_ctx)
    setup = st.setup
    # a batch's prompts go through ceil(batch / prefill batch) context-encoding calls before its first tokens
    pb = min(batch, setup.prefill_batch)
    prefill = st.prefill(input_len, pb)
    calls = math.ceil(batch / pb)
    # the step at the mean context of the generation (the KV cache grows from input to input + output)
    decode = dict(st.decode(batch, input_len + output_len // 2))
    steps = max(1, math.ceil((output_len - 1) / st.tokens_per_step))
    # Neuron: the mean over the KV buckets the generation passes through; exact shapes: the mean context
    step_s = st.mean_decode(batch, input_len, steps) if setup.bucketing else decode["total"]
    ttft, tpot = calls * prefill["total"], step_s / st.tokens_per_step
    serving_est = None
    if rate or concurrency or scenario:
        from .serving import Workload, mlperf, simulate
        w = Workload(mode="closed" if concurrency else "open", rate=float(rate or 0.0),
                     concurrency=int(concurrency or 0), requests=requests, input_dist=input_dist or str(input_len),
                     output_dist=output_dist or str(output_len), seed=seed)
        if scenario:
            serving_est = mlperf(st, scenario, w, mb, setup.prefill_batch, setup.chunk, ttft_limit_ms,
                                 tpot_limit_ms)
        else:
            serving_est = simulate(st, w, mb, setup.prefill_batch, setup.chunk)
    notes = [n for n in (ctx.prec.note, ctx.calib.note) if n]
    notes.append(f"collectives timed by {ctx.comm_name}")
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
        model=cfg.name, instance=system.key, nodes=system.nodes, lnc=system.lnc, cores=tp * pp,
        parallel=dict(tp=tp, pp=pp, ep=ep, sp=sp), precision=ctx.prec.name, batch=batch, input_len=input_len,
        output_len=output_len, ttft_ms=ttft * 1e3, tpot_ms=tpot * 1e3, output_tokens_per_s=batch / tpot,
        memory_per_core_gib=mem.total / GIB, kv_cache_gib=mem.kv_cache / GIB, memory=mem.to_dict(),
        chips_needed=need,
        breakdown={"prefill_compute_ms": prefill["compute"] * 1e3, "prefill_comm_ms": (prefill["comm"] +
                   prefill["p2p"]) * 1e3, "decode_weights_ms": decode["parts"]["weights"] * 1e3,
                   "decode_kv_ms": decode["parts"]["kv"] * 1e3, "decode_compute_ms": decode["parts"]["compute"] * 1e3,
                   "decode_comm_ms": (decode["comm"] + decode["p2p"]) * 1e3,
                   "prefill_fixed_ms": prefill["fixed"] * 1e3, "decode_fixed_ms": decode["fixed"] * 1e3,
                   "prefill_tokens": prefill_len(setup, input_len, ctx_len),
                   "decode_batch": decode_batch(setup, batch), "decode_step_ms": step_s * 1e3,
                   "tokens_per_step": st.tokens_per_step},
        collectives={"prefill": prefill["collectives"], "decode": decode["collectives"]},
        error_band={"ttft_ms": b_ttft, "tpot_ms": b_tpot, "output_tokens_per_s": b_tpot},
        calibration_rows=ctx.calib.rows, ops_by_how=ctx.costing.ops_by_how(),
        sim_seconds=time.perf_counter() - t0, serving=serving_est, notes=tuple(notes))
