"""Memory per (logical) NeuronCore: weights, gradients, optimizer state, activations (with and without
recompute), KV cache, runtime reserve; checked against the core's share of HBM.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Mapping, Optional

from ..errors import ConfigError
from .config import ModelConfig
from .datafiles import figure
from .params import attention_params, count_params, dense_mlp_params, embedding_params, head_params, norm_params
from .parallel import Parallel
from .transformer import layer_counts

GIB = float(1 << 30)
RECOMPUTE = ("none", "selective", "full")


class MemoryFitError(ConfigError):
    """The model does not fit in the HBM of one NeuronCore with the chosen layout."""
    rule = "memory-fit"
    what: str = ""            # the message before its hint
    suggestions: tuple = ()

    def with_suggestions(self, first: List[str]) -> "MemoryFitError":
        """The same error with ``first`` (layouts that fit) ahead of its own suggestions, two at most."""
        sugg = (list(first) + [s for s in self.suggestions if s not in first])[:2]
        head = self.what or self.message
        hint = ("try " + " or ".join(sugg)) if sugg else self.hint
        err = MemoryFitError(f"{head}; {hint}", limit=self.limit, value=self.value, hint=hint)
        err.what, err.suggestions = self.what, tuple(sugg)
        return err


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per (logical) NeuronCore, by what they hold."""
    weights: float
    gradients: float
    optimizer: float
    activations: float
    activations_no_recompute: float
    kv_cache: float
    reserved: float
    hbm_per_core: float

    @property
    def total(self) -> float:
        """Bytes in use on the core."""
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache + self.reserved

    @property
    def fits(self) -> bool:
        """Whether the total fits in the core's HBM."""
        return self.total <= self.hbm_per_core

    def to_dict(self) -> dict:
        """Every part in GiB, plus the total."""
        d = {k: v / GIB for k, v in self.__dict__.items()}
        d = {f"{k}_gib": round(v, 4) for k, v in d.items()}
        d["total_gib"] = round(self.total / GIB, 4)
        return d


def params_per_core(cfg: ModelConfig, par: Parallel, ep_in_tp: bool = False) -> float:
    """Parameters one core holds: its stage's layers split over TP (experts over EP x TP, or over the TP
    group itself for inference with ``ep_in_tp``), plus the embedding or LM head of the heaviest end stage
    (vocab split over TP)."""
    tp = par.tp
    attn = attention_params(cfg) / tp
    norms = norm_params(cfg)
    dense = attn + norms + dense_mlp_params(cfg, cfg.intermediate) / tp
    dense_n, moe_n = layer_counts(cfg, par.pp, par.vp)
    p = dense_n * dense
    if cfg.is_moe:
        expert = dense_mlp_params(cfg, cfg.moe_intermediate)
        etp = tp // par.ep if ep_in_tp else par.etp
        moe = attn + norms + cfg.experts / par.ep * expert / etp + cfg.shared_experts * expert / tp \
            + cfg.hidden * cfg.experts
        p += moe_n * moe
    emb, head = embedding_params(cfg) / tp, head_params(cfg) / tp
    p += (emb + head) if par.pp == 1 else max(emb, head)
    return p


def expert_params_per_core(cfg: ModelConfig, par: Parallel) -> float:
    """The routed-expert share of ``params_per_core`` (training: experts over EP x TP); their gradients and
    optimizer states are replicated only over the dp / ep ranks that hold the same experts."""
    if not cfg.is_moe:
        return 0.0
    moe_n = layer_counts(cfg, par.pp, par.vp)[1]
    return moe_n * cfg.experts / par.ep * dense_mlp_params(cfg, cfg.moe_intermediate) / par.etp


def adapter_params_per_core(cfg: ModelConfig, par: Parallel, lora) -> float:
    """LoRA adapter parameters one core trains: its stage's layers, split over TP as their base layers."""
    if lora is None:
        return 0.0
    from .lora import adapter_params
    dense_n, moe_n = layer_counts(cfg, par.pp, par.vp)
    p = dense_n * adapter_params(cfg, lora, par.tp)
    if moe_n:
        p += moe_n * adapter_params(cfg, lora, par.tp, moe=True, experts=cfg.experts / par.ep + cfg.shared_experts)
    return p


def shard_degree(par: Parallel, shard_over_cp: bool) -> int:
    """Ranks that share one copy of the weights and split ZeRO state between them (dp, or dp x cp)."""
    return par.dp * (par.cp if shard_over_cp else 1)


def activation_bytes_per_layer(cfg: ModelConfig, par: Parallel, micro_batch: int, seq: int, recompute: str,
                               act: float, moe: bool = False, mm_in: Optional[float] = None, lora=None) -> float:
    """Bytes one layer keeps for its backward pass for one micro-batch (flash attention: no score matrix).
    ``mm_in``: bytes per saved linear-layer input (fp8 recipes keep the fp8 cast; default ``act``). With
    ``lora`` (frozen base) a linear layer's input is kept only where an adapter's weight gradient needs it:
    the norms, attention and SwiGLU tensors are kept as in full training."""
    mm_in = act if mm_in is None else mm_in
    fp32 = float(figure("estimator", "training.fp32_bytes"))
    tp = par.tp
    T = micro_batch * seq / par.cp
    Tsp = T / tp if par.sp else T
    h = cfg.hidden
    if recompute == "full":
        return Tsp * h * act                   # only the layer input is kept
    heads = cfg.heads / tp
    if cfg.is_mla:
        qkv = T * heads * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) * 3 * act
        attn_out = T * heads * cfg.v_head_dim * act
    else:
        kvh = max(1.0, cfg.n_kv / tp)
        qkv = T * (heads + 2 * kvh) * cfg.hd * act
        attn_out = T * heads * cfg.hd * act + T * heads * fp32   # O and the fp32 log-sum-exp
    a = 2 * Tsp * h * act + 2 * Tsp * h * mm_in + qkv   # two norm inputs, two matmul inputs, Q/K/V
    if recompute != "selective":
        a += attn_out                                # selective re-runs the attention core
    mult = 3 if cfg.mlp == "swiglu" else 2
    inter = cfg.moe_intermediate * cfg.top_k if moe else cfg.intermediate
    if mm_in != act:   # the down projection's input (one of the MLP's tensors) is kept in the fp8 cast
        a -= T * inter / tp * (act - mm_in)
    if lora is not None:
        t = set(lora.targets)
        if not t & {"q", "k", "v"}:
            a -= Tsp * h * mm_in                     # the QKV projection's input
        if not t & {"gate", "up"}:
            a -= Tsp * h * mm_in                     # the MLP's input
        if "down" not in t:
            a -= T * inter / tp * mm_in              # the down projection's input
    if moe:
        a += T * cfg.top_k * (h + mult * cfg.moe_intermediate / tp) * act + T * cfg.experts * fp32
        if cfg.shared_experts:
            a += T * mult * cfg.shared_experts * cfg.moe_intermediate / tp * act
    else:
        a += T * mult * cfg.intermediate / tp * act
    return a


def training_memory(cfg: ModelConfig, par: Parallel, micro_batch: int, seq: int, recompute: str,
                    hbm_per_core: float, overrides: Optional[Mapping] = None, lora=None,
                    framework=None, mm_in_bytes: Optional[float] = None) -> MemoryBreakdown:
    """Per-core memory for training with AdamW, bf16 autocast and fp32 master weights, laid out as
    ``framework`` (a ``train_frameworks.Framework``; None: the historical layout, ZeRO-1 over dp, fp32 grads) does
    at ZeRO stage ``par.zero``. With ``lora`` the base weights are frozen: only adapters have gradients and
    optimizer state; activations are kept for the backward pass except the inputs of frozen linear layers
    without an adapter (their input gradient needs only the weight). ``mm_in_bytes``:
    bytes of a saved linear-layer input (fp8 training keeps the fp8 cast)."""
    if recompute not in RECOMPUTE:
        raise ConfigError(f"unknown recompute option {recompute!r}", rule="recompute", limit=RECOMPUTE,
                          value=recompute)
    f = lambda k: float(figure("estimator", k, overrides))  # noqa: E731
    p = params_per_core(cfg, par)
    pe = expert_params_per_core(cfg, par)
    over_cp = bool(framework.shard_over_cp) if framework is not None else False
    d = shard_degree(par, over_cp)
    de = max(1, (d * par.tp) // (par.ep * par.etp))   # ranks holding the same experts
    grad_b = framework.grad_bytes if framework is not None else f("training.grad_bytes")
    main_b = framework.main_grad_bytes if framework is not None else 0.0
    z = par.zero
    if lora is not None:          # trainable = adapters (dense: sharded like dense weights)
        tr, tre = adapter_params_per_core(cfg, par, lora), 0.0
    else:
        tr, tre = p, pe

    def shard(total: float, expert: float, on: bool) -> float:
        """Per-core share of ``total`` parameters when ZeRO shards them (experts over fewer ranks)."""
        return (total - expert) / d + expert / de if on else total
    weights = shard(p, pe, z >= 3) * f("training.weight_bytes")
    if z >= 3:   # FSDP / ZeRO-3 gathers one layer while prefetching the next
        dense_n, moe_n = layer_counts(cfg, par.pp, par.vp)
        weights += 2 * (p - pe) / max(1.0, dense_n + moe_n) * f("training.weight_bytes")
    if lora is not None:
        weights += tr * f("training.weight_bytes")
    gradients = shard(tr, tre, z >= 2) * grad_b + shard(tr, tre, z >= 1) * main_b
    optimizer = shard(tr, tre, z >= 1) * (f("training.master_weight_bytes") + f("training.optimizer_state_bytes"))
    act = f("training.activation_bytes")
    # 1F1B: the first stage holds pp micro-batches in flight (Narayanan et al. 2021, arXiv:2104.04473);
    # interleaving with vp virtual stages multiplies that by 1 + (pp-1)/(pp*vp)
    inflight = float(par.pp) if par.vp == 1 else par.pp * (1.0 + (par.pp - 1) / (par.pp * par.vp))
    n_dense, n_moe = layer_counts(cfg, par.pp, par.vp)

    def stage(rc: str) -> float:
        return (n_dense * activation_bytes_per_layer(cfg, par, micro_batch, seq, rc, act, False, mm_in_bytes, lora)
                + n_moe * activation_bytes_per_layer(cfg, par, micro_batch, seq, rc, act, True, mm_in_bytes, lora))
    per_stage, per_stage_none = stage(recompute), stage("none")
    one_layer = activation_bytes_per_layer(cfg, par, micro_batch, seq, "none", act, cfg.moe_layers > 0)
    T = micro_batch * seq / par.cp
    logits = T * cfg.vocab / par.tp * f("training.fp32_bytes")   # fp32 logits for the loss on the last stage
    working = one_layer if recompute == "full" else 0.0   # one layer re-materialised at a time
    reserve = f("memory.reserved_bytes_per_core")
    if framework is not None and not (overrides and "memory.reserved_bytes_per_core" in overrides):
        reserve = framework.reserve_bytes
    return MemoryBreakdown(
        weights=weights, gradients=gradients, optimizer=optimizer,
        activations=per_stage * inflight + logits + working,
        activations_no_recompute=per_stage_none * inflight + logits,
        kv_cache=0.0, reserved=reserve, hbm_per_core=hbm_per_core)


def kv_cache_bytes(cfg: ModelConfig, par: Parallel, batch: int, ctx: int, kv_bytes: float) -> float:
    """KV cache of one core: its stage's layers, its KV heads (replicated when tp > kv heads)."""
    layers = cfg.layers / par.pp
    if cfg.is_mla:   # the compressed latent + the shared RoPE key, not split over TP
        per_tok = cfg.kv_lora_rank + cfg.qk_rope_head_dim
    else:
        per_tok = 2 * max(1.0, cfg.n_kv / par.tp) * cfg.hd
    if cfg.sliding_window:
        ctx = min(ctx, cfg.sliding_window)
    return layers * batch * ctx * per_tok * kv_bytes


def inference_memory(cfg: ModelConfig, par: Parallel, batch: int, ctx: int, weight_bytes: float,
                     hbm_per_core: float, prompt: int = 0, overrides: Optional[Mapping] = None,
                     kv_bytes: Optional[float] = None, framework=None, attention_dp: int = 1) -> MemoryBreakdown:
    """Per-core memory for serving: weights in the chosen format, KV cache, the prefill working set
    (experts spread over the TP group when ep > 1).

    ``kv_bytes`` is the KV-cache element size (default: the estimator's inference.kv_bytes). With a
    ``framework`` (``frameworks.Framework``), its reserve and memory rule apply and prefill runs in chunks of
    its token budget. ``attention_dp`` > 1: attention runs data-parallel over that many groups of tp /
    attention_dp ranks, each holding its own sequences' KV cache (an MLA latent cache is sharded, not copied),
    and the experts are spread over all ``par.ep`` ranks."""
    f = lambda k: float(figure("estimator", k, overrides))  # noqa: E731
    kvb = f("inference.kv_bytes") if kv_bytes is None else float(kv_bytes)
    dp = max(1, int(attention_dp))
    if dp > 1:
        apar = replace(par, tp=max(1, par.tp // dp))
        p = params_per_core(cfg, apar, ep_in_tp=False)
        seqs = -(-batch // dp)
    else:
        apar, p, seqs = par, params_per_core(cfg, par, ep_in_tp=True), batch
    act = f("inference.activation_bytes")
    mult = 3 if cfg.mlp == "swiglu" else 2
    # largest live activation of a layer: the residual stream plus Q/K/V, or the MLP's intermediate
    width = max(cfg.hidden * 4, mult * (cfg.moe_intermediate if cfg.is_moe else cfg.intermediate) / apar.tp)
    tokens = seqs * max(prompt, 1)
    chunk = framework.prefill_chunk_tokens if framework is not None else 0
    if chunk:   # chunked prefill: one token budget of prompts is in flight at a time
        tokens = min(tokens, max(chunk, 1))
    working = tokens * width * act + seqs * cfg.vocab / apar.tp * f("training.fp32_bytes")
    kv = kv_cache_bytes(cfg, apar, seqs, ctx, kvb)
    weights = p * weight_bytes
    reserved, budget = f("memory.reserved_bytes_per_core"), hbm_per_core
    if framework is not None:
        reserved = framework.reserve_bytes
        if framework.memory_rule == "total":
            budget = hbm_per_core * framework.kv_fraction
        else:   # the KV pool takes kv_fraction of what is free: the rest of the free memory stays unused
            reserved += kv * (1.0 / framework.kv_fraction - 1.0)
    return MemoryBreakdown(weights=weights, gradients=0.0, optimizer=0.0, activations=working,
                           activations_no_recompute=working, kv_cache=kv, reserved=reserved, hbm_per_core=budget)


def fit_error(mem: MemoryBreakdown, suggestions: List[str], what: str, rank: str = "NeuronCore") -> MemoryFitError:
    """The error for a layout that does not fit, with the numbers and what to try (``rank``: NeuronCore or
    GPU).  The layouts that fit come from the planner a layer up (``trnsim.api`` adds them with
    ``MemoryFitError.with_suggestions``)."""
    need, have = mem.total / GIB, mem.hbm_per_core / GIB
    hint = ("try " + " or ".join(suggestions)) if suggestions else \
        "`trnsim plan` lists the layouts that fit; or use more nodes, a larger instance or a smaller model"
    head = f"{what} needs {need:.1f} GiB per {rank}, has {have:.0f} GiB"
    err = MemoryFitError(f"{head}; {hint}", limit=f"{have:.1f} GiB", value=f"{need:.1f} GiB", hint=hint)
    err.what, err.suggestions = head, tuple(suggestions)
    return err
