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
    gpu = cat.gpus[spec.gpu]
    return GpuContext(cfg=model if isinstance(model, ModelConfig) else load_model(model), system_key=spec.key,
                      gpus_per_node=spec.gpus, nodes=int(nodes), precision=gprec, mm_dtype=dtype,
                      gpu_hbm_bytes=gpu.hbm_bytes, peak=gpu.peak_flops(gprec), costing=_Costing(costs),
                      comm=GpuComm(spec.key, nodes, cat, fig), figures=fig)


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
    par = resolve(Parallel(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, sp=sp, zero=zero), cfg, ranks)
    global_batch = global_batch or par.dp * micro_batch
    m = check_batch(par, seq, global_batch, micro_batch)
    over = _overrides(ctx)
    f = lambda k: float(figure("estimator", k, over))  # noqa: E731
    mem = training_memory(cfg, par, micro_batch, seq, recompute, ctx.gpu_hbm_bytes, over)
    if check_memory and not mem.fits:
        raise fit_error(mem, ["--recompute full", f"--tp {tp * 2}", f"--pp {pp * 2}"],
                        f"training {cfg.name} on {ctx.system_key} with tp={par.tp} pp={par.pp} dp={par.dp}")
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


def estimate_gpu_inference(model: Union[str, ModelConfig], system: str = "p5.48xlarge", nodes: int = 1,
                           tp: int = 1, pp: int = 1, batch: int = 1, input_len: int = 128, output_len: int = 128,
                           precision: str = "bf16", efficiency: Optional[Mapping[str, float]] = None,
                           figures: Optional[Mapping[str, float]] = None, check_memory: bool = True,
                           ctx: Optional[GpuContext] = None) -> InferenceEstimate:
    """TTFT, TPOT and output tokens/s of ``batch`` requests served by one tp x pp replica of GPUs."""
    from ..datafiles import figure
    from ..infer import step_seconds
    t0 = time.perf_counter()
    ctx = ctx or make_gpu_context(model, system, nodes, precision, efficiency, figures, training=False)
    cfg = ctx.cfg
    if min(batch, input_len, output_len) < 1:
        raise ParallelError("batch, input and output lengths must be positive", rule="batch", limit=">= 1",
                            value=min(batch, input_len, output_len))
    if tp * pp > ctx.gpus:
        raise ParallelError(f"tp x pp = {tp * pp} exceeds the {ctx.gpus} GPUs", rule="parallel-cores",
                            limit=ctx.gpus, value=tp * pp)
    ranks = _Ranks(cores=tp * pp, nodes=ctx.nodes, instance=_Instance(ctx.system_key))
    par = replace(resolve(Parallel(tp=tp, pp=pp, dp=1), cfg, ranks, ranks=tp * pp), dp=1)
    over = _overrides(ctx)
    wb = ctx.layout(par).weight_bytes
    mem = inference_memory(cfg, par, batch, input_len + output_len, wb, ctx.gpu_hbm_bytes, prompt=input_len,
                           overrides=over)
    if check_memory and not mem.fits:
        raise fit_error(mem, [f"--tp {tp * 2}"], f"serving {cfg.name} on {ctx.system_key} with tp={tp} pp={pp}")
    prefill = step_seconds(ctx, par, batch, input_len, input_len, decode=False)
    decode = step_seconds(ctx, par, batch, 1, input_len + output_len // 2, decode=True)
    band = ctx.figures["inference.error_band"]
    weights = float(figure("estimator", "inference.weight_bytes"))
    need = max(1, int(-(-(mem.weights * tp * pp) // (ctx.gpu_hbm_bytes - over["memory.reserved_bytes_per_core"]))))
    return InferenceEstimate(
        model=cfg.name, instance=ctx.system_key, nodes=ctx.nodes, lnc=1, cores=tp * pp,
        parallel=dict(tp=tp, pp=pp, ep=1, sp=False), precision=ctx.precision, batch=batch, input_len=input_len,
        output_len=output_len, ttft_ms=prefill["total"] * 1e3, tpot_ms=decode["total"] * 1e3,
        output_tokens_per_s=batch / decode["total"], memory_per_core_gib=mem.total / GIB,
        kv_cache_gib=mem.kv_cache / GIB, memory=mem.to_dict(), chips_needed=need,
        breakdown={"prefill_compute_ms": prefill["compute"] * 1e3,
                   "prefill_comm_ms": (prefill["comm"] + prefill["p2p"]) * 1e3,
                   "decode_compute_ms": decode["compute"] * 1e3,
                   "decode_comm_ms": (decode["comm"] + decode["p2p"]) * 1e3},
        error_band={"ttft_ms": band, "tpot_ms": band, "output_tokens_per_s": band},
        calibration_rows=(), ops_by_how={"roofline": sorted({o.name for o in ctx.costing.memo})},
        sim_seconds=time.perf_counter() - t0, serving=None,
        notes=(f"GPU serving: roofline x stated efficiencies, unvalidated (no inference row); weights "
               f"{weights:g} B/param in the Trainium default",))
