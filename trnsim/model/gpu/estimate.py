"""Model-level estimates on GPU systems: the same transformer op graph, parallel layouts, memory fit and
collectives plan as the Trainium estimator (``model/train.py``, ``model/infer.py``), with ``GpuOpCosts`` per op
and ``GpuComm`` (NVLink inside a domain, EFA / InfiniBand between) for the collectives.

Ranks are GPUs. Results are the model layer's own ``TrainingEstimate`` / ``InferenceEstimate`` records, so
``trnsim compare`` reads Trainium and GPU estimates the same way (``lnc`` is 1, ``cores`` counts GPUs).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional, Union

from ...errors import ConfigError
from ..config import ModelConfig, load_model
from ..memory import GIB, expert_params_per_core, fit_error, inference_memory, params_per_core, training_memory
from ..ops import Op
from ..parallel import Parallel, ParallelError, check_batch, resolve
from ..results import InferenceEstimate, TrainingEstimate
from ..transformer import Layout, optimizer_graph, training_graph
from .comm import GpuComm, estimator_figures
from .costs import GpuOpCosts
from .serving_costs import GpuServingCosts
from .efficiency import load_efficiency
from .systems import GpuCatalog, load_gpu_catalog

# trnsim precision names -> (GpuOpCosts precision, the dtype the op graph writes for matmuls)
PRECISION_MAP = {"bf16": ("bf16", "bfloat16"), "fp8": ("fp8", "float8_e4m3"), "mxfp8": ("fp8", "float8_e4m3"),
                 "fp4": ("fp4", "mxfp4"), "mxfp4": ("fp4", "mxfp4")}


@dataclass
class _Costing:
    """Memoised per-op seconds on one GPU (the ``ctx.costing`` the shared estimator code calls)."""
    costs: GpuOpCosts
    memo: Dict[Op, float] = field(default_factory=dict)

    def seconds(self, op: Op) -> float:
        """Seconds of ``op`` on one GPU."""
        t = self.memo.get(op)
        if t is None:
            t = self.memo[op] = self.costs.time(op).seconds
        return t


@dataclass
class _Instance:
    key: str


@dataclass
class _Ranks:
    """Just enough of a ``System`` for ``parallel.resolve`` to count and name ranks."""
    cores: int
    nodes: int
    instance: _Instance
    lnc: int = 1


@dataclass
class GpuContext:
    """Resolved inputs of one GPU estimate; duck-types the ``Context`` the shared estimator code reads."""
    cfg: ModelConfig
    system_key: str
    gpus_per_node: int
    nodes: int
    precision: str
    mm_dtype: str
    gpu_hbm_bytes: float
    peak: float
    costing: _Costing
    comm: GpuComm
    figures: Mapping[str, float]
    comm_name: str = "GpuComm"
    gpu_hbm_bytes_per_s: float = 0.0
    _memo: dict = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """GPUs of the whole cluster."""
        return self.gpus_per_node * self.nodes

    def layout(self, par: Parallel, act_bytes: float = 2.0, weight_bytes: Optional[float] = None) -> Layout:
        """The per-GPU Layout of a parallel plan."""
        wb = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}[self.precision] if weight_bytes is None else weight_bytes
        return Layout(tp=par.tp, sp=par.sp, ep=par.ep, cp=par.cp, pp=par.pp, mm_dtype=self.mm_dtype,
                      weight_bytes=wb, act_bytes=act_bytes)

    def comm_s(self, op: str, size: float, ranks) -> float:
        """Seconds of one collective over GPU ranks (memoised)."""
        if len(ranks) <= 1 or size <= 0:
            return 0.0
        key = (op, float(size), tuple(ranks))
        if key not in self._memo:
            self._memo[key] = self.comm.time_s(op, size, ranks)
        return self._memo[key]


def make_gpu_context(model: Union[str, ModelConfig], system: str, nodes: int = 1, precision: str = "bf16",
                     efficiency: Optional[Mapping[str, float]] = None,
                     figures: Optional[Mapping[str, float]] = None, catalog: Optional[GpuCatalog] = None,
                     training: bool = True) -> GpuContext:
    """Resolve a GPU estimate's inputs; ``efficiency`` overrides GpuOpCosts factors, ``figures`` the
    estimator.toml ones (``{"comm.network_efficiency": 0.7}``)."""
    if precision not in PRECISION_MAP:
        raise ConfigError(f"unknown precision {precision!r} for a GPU estimate", rule="precision",
                          limit=sorted(PRECISION_MAP), value=precision)
    if nodes < 1:
        raise ParallelError("--nodes must be at least 1", rule="nodes", limit=">= 1", value=nodes)
    cat = catalog or load_gpu_catalog()
    spec = cat.system(system)
    gprec, dtype = PRECISION_MAP[precision]
    fig = estimator_figures(figures)
    eff = dict(efficiency or {})
    if training:
        # the re-fitted op-level factors (the lumped ones hold comm and bubbles this estimator adds itself)
        table = load_efficiency(spec.gpu)
        scale = fig["training.matmul_fp8_scale"] if gprec != "bf16" else fig["training.matmul_bf16_scale"]
        eff.setdefault("matmul", min(1.0, table.matmul[gprec] * scale))
        eff.setdefault("attention", min(1.0, table.attention[table.attention_precision]
                                        * fig["training.matmul_bf16_scale"]))
        costs = GpuOpCosts(spec.gpu, gprec, efficiency=eff, catalog=cat)
    else:
        # serving costs each op by phase and shape (serving.toml); ``efficiency`` overrides its factors
        costs = GpuServingCosts(spec.gpu, gprec, overrides=eff, catalog=cat)
    gpu = cat.gpus[spec.gpu]
    return GpuContext(cfg=model if isinstance(model, ModelConfig) else load_model(model), system_key=spec.key,
                      gpus_per_node=spec.gpus, nodes=int(nodes), precision=gprec, mm_dtype=dtype,
                      gpu_hbm_bytes=gpu.hbm_bytes, peak=gpu.peak_flops(gprec), costing=_Costing(costs),
                      comm=GpuComm(spec.key, nodes, cat, fig), figures=fig,
                      gpu_hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s)


def _overrides(ctx: GpuContext) -> dict:
    # the model layer's memory functions read a per-core reserve: a GPU keeps its own (CUDA context, NCCL)
    return {"memory.reserved_bytes_per_core": ctx.figures["memory.reserved_bytes_per_gpu"]}


def estimate_gpu_training(model: Union[str, ModelConfig], system: str = "p5.48xlarge", nodes: int = 1,
                          tp: int = 1, pp: int = 1, dp: int = 0, cp: int = 1, ep: int = 1, vp: int = 1,
                          sp: bool = False, zero: int = 0, seq: int = 2048, global_batch: int = 0,
                          micro_batch: int = 1, recompute: str = "none", precision: str = "bf16",
                          efficiency: Optional[Mapping[str, float]] = None,
                          figures: Optional[Mapping[str, float]] = None, check_memory: bool = True,
                          ctx: Optional[GpuContext] = None) -> TrainingEstimate:
    """One training step (AdamW, bf16 autocast, fp32 master weights) on ``nodes`` x a GPU ``system``."""
    from ..datafiles import figure
    from ..train import _collectives, _dp_reduction, _model_flops
    t0 = time.perf_counter()
    ctx = ctx or make_gpu_context(model, system, nodes, precision, efficiency, figures)
    cfg = ctx.cfg
    ranks = _Ranks(cores=ctx.gpus, nodes=ctx.nodes, instance=_Instance(ctx.system_key))
    try:
        par = resolve(Parallel(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, sp=sp, zero=zero), cfg, ranks)
    except ConfigError as e:
        raise _gpu_words(e) from None
    global_batch = global_batch or par.dp * micro_batch
    m = check_batch(par, seq, global_batch, micro_batch)
    over = _overrides(ctx)
    f = lambda k: float(figure("estimator", k, over))  # noqa: E731
    mem = training_memory(cfg, par, micro_batch, seq, recompute, ctx.gpu_hbm_bytes, over)
    if check_memory and not mem.fits:
        raise fit_error(mem, ["--recompute full", f"--tp {tp * 2}", f"--pp {pp * 2}"],
                        f"training {cfg.name} on {ctx.system_key} with tp={par.tp} pp={par.pp} dp={par.dp}", unit="GPU")
    lay = ctx.layout(par, act_bytes=f("training.activation_bytes"), weight_bytes=f("training.weight_bytes"))
    graph = training_graph(cfg, lay, micro_batch, seq, recompute)
    sec = ctx.costing.seconds
    phase = graph.by_phase(sec)
    fwd, bwd = phase.get("forward", 0.0), phase.get("backward", 0.0)
    rec, head = phase.get("recompute", 0.0), phase.get("head", 0.0)
    colls = _collectives(ctx, par, micro_batch, seq, recompute, f("training.activation_bytes"))
    per_mb = fwd + bwd + rec + head + sum(c["seconds"] for c in colls.values())
    pipeline, bubble = m * per_mb, (par.pp - 1) / par.vp * per_mb
    p_local, p_expert = params_per_core(cfg, par), expert_params_per_core(cfg, par)
    dp_comm = _dp_reduction(ctx, par, p_local - p_expert, p_expert, f("training.dp_overlap_fraction") * bwd, f)
    edp = max(1, par.dp // par.ep)
    opt_params = ((p_local - p_expert) / par.dp + p_expert / edp) if par.zero else p_local
    opt = optimizer_graph(opt_params, f("training.optimizer_hbm_bytes_per_param")).time(sec)
    step = pipeline + bubble + sum(c["exposed"] for c in dp_comm.values()) + opt
    for c in colls.values():
        c.update(seconds=c["seconds"] * m, exposed=c["seconds"] * m, overlapped=0.0)
    comm_all = {**colls, **dp_comm}
    tokens = global_batch * seq
    model_flops = _model_flops(cfg, seq) * tokens
    hw_flops = model_flops + graph.flops("recompute") * m * par.tp * par.cp * par.pp * par.dp
    band = ctx.figures["training.error_band"]
    return TrainingEstimate(
        model=cfg.name, instance=ctx.system_key, nodes=ctx.nodes, lnc=1, cores=ctx.gpus, parallel=par.to_dict(),
        precision=ctx.precision, seq=seq, global_batch=global_batch, micro_batch=micro_batch, micro_batches=m,
        recompute=recompute, step_time_s=step, seq_per_s=global_batch / step, tokens_per_s=tokens / step,
        mfu=model_flops / (step * ctx.gpus * ctx.peak), hfu=hw_flops / (step * ctx.gpus * ctx.peak),
        model_flops_per_step=model_flops, memory_per_core_gib=mem.total / GIB, memory=mem.to_dict(),
        breakdown={"forward": fwd * m, "backward": bwd * m, "recompute": rec * m, "embedding_and_head": head * m,
                   "optimizer": opt, "pipeline_bubble": bubble,
                   "comm_exposed": sum(c["exposed"] for c in comm_all.values()),
                   "comm_overlapped": sum(c["overlapped"] for c in comm_all.values())},
        comm=comm_all, error_band={"step_time_s": band, "seq_per_s": band, "tokens_per_s": band, "mfu": band},
        calibration_rows=("P294", "P301", "P310"), ops_by_how={"roofline": sorted({o.name for o in ctx.costing.memo})},
        sim_seconds=time.perf_counter() - t0,
        notes=("GPU op costs: roofline x efficiency factors re-fitted on gpus.csv (model/gpu/data)",
               "collectives timed by GpuComm (alpha-beta, NVLink + EFA/IB)"))


def _gpu_words(err: ConfigError) -> ConfigError:
    """The shared layout rules speak of NeuronCores; on a GPU system a rank is a GPU."""
    msg = err.message
    for a, b in (("logical NeuronCores", "GPUs"), ("NeuronCores", "GPUs"), ("NeuronCore", "GPU"),
                 (", LNC=1", "")):
        msg = msg.replace(a, b)
    err.message = msg
    err.args = (msg,) + tuple(err.args[1:])
    return err


def serving_layout(cfg: ModelConfig, ctx: GpuContext, tp: int, pp: int, ep: int, attention_dp: int,
                   replicas: int) -> Parallel:
    """The Parallel of one serving replica: tp x pp GPUs, attention over ``attention_dp`` groups of
    tp / attention_dp GPUs, experts over ``ep`` GPUs; ``replicas`` copies of it must fit the system."""
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep), ("attention_dp", attention_dp), ("replicas", replicas)):
        if v < 1:
            raise ParallelError(f"--{name.replace('_', '-')} must be at least 1", rule=f"parallel-{name}",
                                limit=">= 1", value=v)
    if tp * pp * replicas > ctx.gpus:
        raise ParallelError(f"tp x pp x replicas = {tp * pp * replicas} exceeds the {ctx.gpus} GPUs of "
                            f"{ctx.nodes} x {ctx.system_key}", rule="parallel-cores", limit=ctx.gpus,
                            value=tp * pp * replicas)
    if tp % attention_dp:
        raise ParallelError(f"attention-dp={attention_dp} must divide tp={tp}", rule="parallel-attention-dp",
                            limit=f"a divisor of {tp}", value=attention_dp)
    if ep > 1 and not cfg.is_moe:
        raise ParallelError(f"expert parallelism needs an MoE model; {cfg.name} is dense", rule="parallel-ep",
                            limit=1, value=ep)
    if attention_dp > 1:
        if ep > tp * pp or ep > cfg.experts:
            raise ParallelError(f"ep={ep} exceeds the replica's {tp * pp} GPUs or the {cfg.experts} experts",
                                rule="parallel-ep", limit=min(tp * pp, cfg.experts), value=ep)
        atp = tp // attention_dp
        ranks = _Ranks(cores=atp * pp, nodes=ctx.nodes, instance=_Instance(ctx.system_key))
        try:
            par = resolve(Parallel(tp=atp, pp=pp, dp=1), cfg, ranks, ranks=atp * pp)
        except ConfigError as e:
            raise _gpu_words(e) from None
        return replace(par, tp=tp, ep=ep, dp=1)
    if ep > 1 and tp % ep:
        raise ParallelError(f"ep={ep} must divide tp={tp} (without attention DP the experts are spread over the "
                            "TP group)", rule="parallel-ep-tp", limit=f"a divisor of {tp}", value=ep)
    ranks = _Ranks(cores=tp * pp * ep, nodes=ctx.nodes, instance=_Instance(ctx.system_key))
    try:
        par = resolve(Parallel(tp=tp, pp=pp, dp=ep, ep=ep), cfg, ranks, ranks=tp * pp * ep)
    except ConfigError as e:
        raise _gpu_words(e) from None
    return replace(par, dp=1)


def estimate_gpu_inference(model: Union[str, ModelConfig], system: str = "p5.48xlarge", nodes: int = 1,
                           tp: int = 1, pp: int = 1, batch: int = 1, input_len: int = 128, output_len: int = 128,
                           precision: str = "bf16", efficiency: Optional[Mapping[str, float]] = None,
                           figures: Optional[Mapping[str, float]] = None, check_memory: bool = True,
                           ctx: Optional[GpuContext] = None, framework: str = "trtllm",
                           kv_dtype: Optional[str] = None, ep: int = 1, attention_dp: int = 1,
                           replicas: int = 1, framework_overrides: Optional[Mapping[str, object]] = None
                           ) -> InferenceEstimate:
    """TTFT, TPOT and output tokens/s of ``batch`` requests served by one tp x pp replica of GPUs under a
    serving ``framework`` (trtllm | vllm | sglang), KV cache in ``kv_dtype`` (default: the framework's),
    attention over ``attention_dp`` data-parallel groups, experts over ``ep`` GPUs; ``replicas`` such replicas
    share the load (output tokens/s counts them all)."""
    from ..datafiles import figure
    from ..deploy import chunked_prefill
    from ..frameworks import kv_bytes, load_framework, resolve_kv
    from ..infer import step_seconds
    t0 = time.perf_counter()
    ctx = ctx or make_gpu_context(model, system, nodes, precision, efficiency, figures, training=False)
    cfg = ctx.cfg
    if min(batch, input_len, output_len) < 1:
        raise ParallelError("batch, input and output lengths must be positive", rule="batch", limit=">= 1",
                            value=min(batch, input_len, output_len))
    fw = load_framework(framework, framework_overrides)
    if fw.systems != "gpu":
        raise ConfigError(f"{fw.name} does not serve on GPUs", rule="framework", value=framework,
                          limit=("trtllm", "vllm", "sglang"))
    gpu = load_gpu_catalog().gpus[load_gpu_catalog().system(ctx.system_key).gpu]
    hw_kv = tuple(p for p in ("bf16", "fp8", "fp4") if getattr(gpu, f"{p}_flops"))
    kv = resolve_kv(fw, kv_dtype, ctx.precision, hw_kv)
    kvb = kv_bytes(kv)
    par = serving_layout(cfg, ctx, tp, pp, ep, attention_dp, replicas)
    wb = ctx.layout(par).weight_bytes
    mem = inference_memory(cfg, par, batch, input_len + output_len, wb, ctx.gpu_hbm_bytes, prompt=input_len,
                           kv_bytes=kvb, framework=fw, attention_dp=attention_dp)
    if check_memory and not mem.fits:
        sugg = [f"--tp {tp * 2}"] if tp * 2 * pp * replicas <= ctx.gpus else []
        if kv == "bf16" and "fp8" in fw.kv_formats and "fp8" in hw_kv:
            sugg.append("--kv-dtype fp8")
        if batch > 1:
            sugg.append("a smaller --batch")
        raise fit_error(mem, sugg, f"serving {cfg.name} (batch {batch}, context {input_len + output_len}, "
                        f"{kv} KV cache, {fw.name}) on {ctx.system_key} with tp={tp} pp={pp}"
                        + (f" attention-dp={attention_dp}" if attention_dp > 1 else "")
                        + (f" ep={ep}" if ep > 1 else ""), unit="GPU")
    opts = dict(kv_bytes=kvb, attention_dp=attention_dp, step_overhead_s=fw.step_overhead_s)
    prefill = chunked_prefill(lambda b, q, kv: step_seconds(ctx, par, b, q, kv, decode=False, **opts),
                              batch, input_len, fw.prefill_chunk_tokens)
    decode = step_seconds(ctx, par, batch, 1, input_len + output_len // 2, decode=True, **opts)
    ttft = prefill["total"] + fw.request_overhead_s
    band = ctx.figures["inference.error_band"]
    need = max(1, int(-(-(mem.weights * tp * pp) // (ctx.gpu_hbm_bytes - fw.reserve_bytes))))
    return InferenceEstimate(
        model=cfg.name, instance=ctx.system_key, nodes=ctx.nodes, lnc=1, cores=tp * pp * replicas,
        parallel=dict(tp=tp, pp=pp, ep=ep, sp=False, attention_dp=attention_dp, replicas=replicas),
        precision=ctx.precision, batch=batch, input_len=input_len,
        output_len=output_len, ttft_ms=ttft * 1e3, tpot_ms=decode["total"] * 1e3,
        output_tokens_per_s=replicas * batch / decode["total"], memory_per_core_gib=mem.total / GIB,
        kv_cache_gib=mem.kv_cache / GIB, memory=mem.to_dict(), chips_needed=need,
        breakdown={"prefill_compute_ms": prefill["compute"] * 1e3,
                   "prefill_comm_ms": (prefill["comm"] + prefill["p2p"]) * 1e3,
                   "prefill_overhead_ms": (prefill["overhead"] + fw.request_overhead_s) * 1e3,
                   "decode_compute_ms": decode["compute"] * 1e3,
                   "decode_comm_ms": (decode["comm"] + decode["p2p"]) * 1e3,
                   "decode_overhead_ms": decode["overhead"] * 1e3,
                   "decode_weights_ms": _decode_weights_s(ctx, mem.weights) * 1e3},
        error_band={"ttft_ms": band, "tpot_ms": band, "output_tokens_per_s": band},
        calibration_rows=("found-2026-11b: see model/gpu/data/serving.toml, model/data/frameworks.toml",),
        ops_by_how={"serving-roofline": sorted({o.name for o in ctx.costing.memo})},
        sim_seconds=time.perf_counter() - t0, serving=None,
        framework=dict(fw.to_dict(), kv_dtype=kv, kv_bytes=kvb),
        notes=(f"served by {fw.name}: {kv} KV cache" + (" (the framework's default)" if kv_dtype is None else "")
               + f", {fw.step_overhead_s * 1e3:g} ms per step, {fw.request_overhead_s * 1e3:g} ms per request, "
               f"prefill in chunks of {fw.prefill_chunk_tokens} tokens",
               "GPU serving op costs: model/gpu/data/serving.toml (per GPU, precision and phase)"))


def _decode_weights_s(ctx: GpuContext, weight_bytes: float) -> float:
    """The weight-streaming floor of one decode step on one GPU: its weights read once from HBM."""
    return weight_bytes / ctx.gpu_hbm_bytes_per_s
