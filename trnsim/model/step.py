"""One forward pass of a served model: a prefill (context encoding) or a decode (token generation) step
through all pipeline stages, compute + collectives, and -- given a Neuron ``ServingSetup`` -- padded to the
compiled buckets with the fixed costs of each launch. Both the inference estimate and the serving
simulation take their step times from here."""
from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Dict, Optional, Tuple

from .context import Context
from .datafiles import figure
from .neuron import ServingSetup, decode_batch, decode_kv, prefill_len, runtime
from .parallel import Parallel, group_ranks
from .transformer import inference_graph, moe_rank_load


def _expert_bytes(ctx: Context) -> float:
    """Bytes per routed-expert weight: the checkpoint's expert format where the chip has that matmul
    (MX formats need an MX TensorE), else the precision's (the experts are dequantized at load)."""
    fmt = ctx.cfg.expert_format
    if not fmt:
        return 0.0
    if fmt.startswith("mx") and not ctx.system.core.tensor.mx:
        return 0.0
    return float(figure("estimator", f"precision.{fmt}"))


def step_seconds(ctx: Context, par: Parallel, batch: int, q: int, kv: int, decode: bool,
                 setup: Optional[ServingSetup] = None, kv_bytes: float = 0.0, attention_dp: int = 1,
                 step_overhead_s: float = 0.0) -> dict:
    """One forward pass (prefill of q tokens, or one decode step) through all stages: compute + comm.

    ``setup``: a Neuron deployment (its fixed costs per op and per launch, its MoE kernels); shapes are taken
    as given, padding to buckets is the caller's (``StepTimes``). ``kv_bytes``: KV-cache element size
    attention reads (0: activation width). ``attention_dp`` > 1: attention runs data-parallel over that many
    groups of tp / attention_dp ranks (each with its own sequences) and the experts are spread over all
    ``par.ep`` ranks, tokens reaching them by all-to-all. ``step_overhead_s``: the serving framework's fixed
    cost per forward step."""
    cfg = ctx.cfg
    a = float(figure("estimator", "inference.activation_bytes"))
    adp = max(1, int(attention_dp))
    lay = replace(ctx.layout(par, act_bytes=a), ep_in_tp=adp == 1, kv_bytes=kv_bytes, tp=max(1, par.tp // adp))
    if decode and lay.sp:   # one token per sequence: nothing to split along the sequence
        lay = replace(lay, sp=False)
    dispatch = "all-gather"
    rt = runtime(ctx.system.target, setup) if setup is not None else {}
    if setup is not None:
        lay = replace(lay, moe_block=max(1, int(round(rt["moe_block_tokens"]))),
                      moe_skew=float(setup.fig("moe.router_skew")), pe_pad=int(setup.fig("moe.pe_pad")),
                      expert_weight_bytes=_expert_bytes(ctx),
                      moe_all_experts=(setup.moe_prefill or str(setup.fig("moe.prefill"))) == "all-experts")
        dispatch = setup.moe_dispatch or str(setup.fig("moe.dispatch"))
    b = -(-batch // adp)
    graph = inference_graph(cfg, lay, b, q, kv, decode)
    compute = graph.time(ctx.costing.seconds)
    extra = 0.0      # Neuron fixed costs inside the graph (per op, per expert block)
    fixed = step_overhead_s
    if setup is not None:
        extra += rt["op_fixed_s"] * sum(g.count for g in graph.ops)
        fixed += rt["step_overhead_s"] if decode else rt["prefill_fixed_s"]
        if cfg.is_moe and not decode and rt["moe_block_fixed_s"] and not lay.moe_all_experts:
            # blockwise expert matmul: every block of every active expert is one kernel iteration with its
            # own weight load and launch, whatever its size
            busiest, active = moe_rank_load(cfg, b * q, lay.ep if not lay.ep_in_tp else par.ep, lay.moe_skew)
            n_act = max(1, math.ceil(active - 1e-9))
            blocks = n_act * math.ceil(busiest / n_act / max(1, lay.moe_block))
            extra += rt["moe_block_fixed_s"] * blocks * cfg.moe_layers / par.pp
    compute += extra
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
    elif dispatch == "all-to-all" and par.ep > 1 and cfg.is_moe:
        # framework choice: each token's hidden state sent to its top-k experts' ranks and back
        size = T * cfg.top_k * cfg.hidden * a / par.ep
        comm += ctx.charge("all-to-all", size, group_ranks(par, "tp")[:par.ep], 2 * cfg.moe_layers, tally) / par.pp
    # otherwise the experts are spread over the TP group, which already shares the tokens: the MoE output
    # joins the layer's all-reduce, no all-to-all is needed
    p2p = ctx.charge("send-recv", T * cfg.hidden * a, group_ranks(par, "pp"), par.pp - 1, tally) \
        if par.pp > 1 else 0.0
    stage = compute + comm
    parts = {k: par.pp * v for k, v in ctx.costing.parts(graph).items()}
    parts["compute"] = parts.get("compute", 0.0) + par.pp * extra   # fixed costs in the graph count as compute
    return dict(total=par.pp * stage + p2p + fixed, compute=par.pp * compute, comm=par.pp * comm,
                p2p=p2p, stage=stage, parts=parts, collectives=tally, overhead=fixed, fixed=fixed)


class StandaloneComm:
    """Collectives launched one call at a time (as nccom-test runs them): the fabric with ``in_graph=False``,
    for deployments whose collectives leave the compiled graph."""

    def __init__(self, system, hardware_file: Optional[str] = None):
        from ..fabric import FabricComm
        self.fabric = FabricComm(system.key, instances=system.nodes, lnc=system.lnc, hardware_file=hardware_file,
                                 in_graph=False)

    def time_s(self, op: str, size_bytes: float, ranks) -> float:
        """Seconds of one standalone collective."""
        return self.fabric.time_s(op, size_bytes, ranks)


class StepTimes:
    """Memoised step times of one deployment as the Neuron stack runs it: prompts pay their bucket, decode
    steps the compiled batch and KV bucket; with speculation a decode step is the draft's proposals plus
    one target verification of n + 1 tokens per sequence."""

    def __init__(self, ctx: Context, par: Parallel, setup: ServingSetup, need: int, draft_ctx=None,
                 opts: Optional[dict] = None):
        self.ctx, self.par, self.need = ctx, par, need
        self.opts = dict(opts or {})   # step_seconds' kv_bytes, attention_dp, step_overhead_s
        # compiled buckets, Neuron fixed costs and NxDI's MoE kernels belong to Neuron devices; other systems
        # run exact shapes (their framework costs are their estimator's)
        self.neuron = is_neuron(ctx.system.target)
        self.setup = setup if self.neuron else replace(setup, bucketing=False)
        self._ns = self.setup if self.neuron else None
        # a model's collectives are the fabric's in-graph calls (its default); standalone calls on request
        if self.neuron and not setup.in_graph_collectives:
            self.ctx = replace(ctx, comm=StandaloneComm(ctx.system), comm_name="FabricComm (standalone calls)",
                               _comm_memo={})
            if draft_ctx is not None:
                draft_ctx = replace(draft_ctx, comm=self.ctx.comm, _comm_memo={})
        self.draft_ctx = draft_ctx
        self.tokens_per_step = setup.spec.tokens_per_step()
        self._pf: Dict[Tuple[int, int], dict] = {}
        self._dc: Dict[Tuple[int, int], dict] = {}

    def prefill(self, n: int, batch: int = 1) -> dict:
        """One context-encoding call of ``batch`` prompts of ``n`` new tokens (prefix-cache hits removed)."""
        new = max(1, int(round(n * (1.0 - self.setup.prefix_hit))))
        L = prefill_len(self.setup, new, self.need)
        key = (L, batch)
        if key not in self._pf:
            # a cached prefix is still attended over: the keys are the whole prompt's bucket
            kv = prefill_len(self.setup, n, self.need) if self.setup.prefix_hit else L
            d = step_seconds(self.ctx, self.par, batch, L, kv, False, self._ns, **self.opts)
            if self.setup.spec.on and self.draft_ctx is not None:   # the draft sees the prompt too
                dd = step_seconds(self.draft_ctx, self.par, batch, L, kv, False, None)
                d = dict(d, total=d["total"] + dd["total"], draft=dd["total"])
            self._pf[key] = d
        return self._pf[key]

    def decode(self, batch: int, kv: int) -> dict:
        """One target step (with its draft proposals) of ``batch`` sequences at context ``kv``."""
        B, K = decode_batch(self.setup, batch), decode_kv(self.setup, kv, self.need)
        key = (B, K)
        if key not in self._dc:
            spec = self.setup.spec
            q = spec.tokens + 1 if spec.on else 1
            d = step_seconds(self.ctx, self.par, B, q, K, True, self._ns, **self.opts)
            if spec.on and self.draft_ctx is not None:
                dd = step_seconds(self.draft_ctx, self.par, B, 1, K, True, None)
                d = dict(d, total=d["total"] + spec.tokens * dd["total"], draft=spec.tokens * dd["total"])
            self._dc[key] = d
        return self._dc[key]

    def mean_decode(self, batch: int, first: int, steps: int) -> float:
        """Mean seconds per target step of a sequence generating from context ``first`` for ``steps`` steps
        (the KV bucket changes as it grows)."""
        if steps <= 0:
            return self.decode(batch, first)["total"]
        tps = self.tokens_per_step
        total, n = 0.0, 0
        pos, end = float(first), first + steps * tps
        while pos < end:
            K = decode_kv(self.setup, int(pos) + 1, self.need) if self.setup.bucketing else int(pos) + 1
            upto = min(end, float(K)) if self.setup.bucketing else end
            k = max(1, int(round((upto - pos) / tps)))
            total += k * self.decode(batch, int(pos) + 1)["total"]
            n += k
            pos = upto if upto > pos else end
        return total / max(1, n)


def is_neuron(target: str) -> bool:
    """Whether a generation is a Neuron device (Trainium / Inferentia)."""
    return str(target).startswith(("trn", "inf"))


@functools.lru_cache(maxsize=32)
def draft_config(cfg, layers: int):
    """An EAGLE-style draft head of ``cfg``: ``layers`` dense decoder layers at the target's width."""
    return replace(cfg, name=cfg.name + "-eagle", layers=layers, experts=0, top_k=0, moe_intermediate=0,
                   shared_experts=0, dense_layers=0, full_attention_every=0, linear_value_heads=0,
                   sliding_window=0, attention_chunk=0, shared_expert_intermediate=0, expert_format="")
