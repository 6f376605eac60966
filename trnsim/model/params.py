"""Parameter counts from the architecture: per layer (attention, MLP / experts, norms) and in total."""
from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


def attention_params(cfg: ModelConfig) -> int:
    """Weights of one attention block (Q, K, V, O; MLA's low-rank projections; biases; QK norms)."""
    h = cfg.hidden
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        q = (h * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * cfg.heads * qk) if cfg.q_lora_rank \
            else h * cfg.heads * qk
        kv = h * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank \
            + cfg.kv_lora_rank * cfg.heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        return q + kv + cfg.heads * cfg.v_head_dim * h
    q, kv = cfg.heads * cfg.hd, cfg.n_kv * cfg.hd
    p = h * (q * (2 if cfg.attn_output_gate else 1) + 2 * kv) + q * h
    if cfg.bias:
        p += q + 2 * kv + h
    if cfg.qk_norm:
        p += 2 * cfg.hd
    if cfg.attention_sinks:
        p += cfg.heads
    return p


def linear_attention_params(cfg: ModelConfig) -> int:
    """Weights of one gated-delta-rule linear-attention block: Q/K/V/Z and the beta/alpha gates in, the
    causal convolution over Q/K/V, the output projection and its gated norm."""
    h = cfg.hidden
    k = cfg.linear_key_heads * cfg.linear_key_dim
    v = cfg.linear_value_heads * cfg.linear_value_dim
    proj_in = h * (2 * k + 2 * v + 2 * cfg.linear_value_heads)
    conv = (2 * k + v) * cfg.linear_conv
    return proj_in + conv + v * h + cfg.linear_value_dim + 2 * cfg.linear_value_heads


def dense_mlp_params(cfg: ModelConfig, intermediate: int) -> int:
    """Weights of one dense MLP of width ``intermediate`` (SwiGLU has three matrices, GELU two)."""
    h = cfg.hidden
    if cfg.mlp == "swiglu":
        return 3 * h * intermediate
    return 2 * h * intermediate + (intermediate + h if cfg.bias else 0)


def moe_params(cfg: ModelConfig) -> tuple:
    """(total, active per token) weights of one MoE layer: routed experts, shared experts, router."""
    expert = dense_mlp_params(cfg, cfg.moe_intermediate)
    shared = dense_mlp_params(cfg, cfg.shared_expert_intermediate) if cfg.shared_expert_intermediate \
        else cfg.shared_experts * expert
    router = cfg.hidden * cfg.experts
    return cfg.experts * expert + shared + router, cfg.top_k * expert + shared + router


def norm_params(cfg: ModelConfig) -> int:
    """Two norms per layer (LayerNorm has a bias too)."""
    return 2 * cfg.hidden * (2 if cfg.norm == "layernorm" else 1)


def embedding_params(cfg: ModelConfig) -> int:
    """Token (+ learned position, + token-type) embeddings."""
    p = cfg.vocab * cfg.hidden
    if cfg.position == "learned":
        p += cfg.max_position * cfg.hidden
    p += cfg.type_vocab * cfg.hidden
    return p


def head_params(cfg: ModelConfig) -> int:
    """LM head (0 when tied to the embedding) plus the final norm."""
    final_norm = cfg.hidden * (2 if cfg.norm == "layernorm" else 1)
    return (0 if cfg.tied_embeddings else cfg.vocab * cfg.hidden) + final_norm


@dataclass(frozen=True)
class ParamCount:
    """Parameter totals of a model (active = used per token, for MoE)."""
    total: int
    active: int
    embedding: int
    head: int
    per_dense_layer: int
    per_moe_layer: int
    per_moe_layer_active: int
    expert: int                # one routed expert
    attention: int

    def to_dict(self) -> dict:
        """The counts as a dict."""
        return dict(self.__dict__)


def count_params(cfg: ModelConfig) -> ParamCount:
    """All parameters of ``cfg`` computed from its shapes."""
    attn = attention_params(cfg)
    norms = norm_params(cfg)
    dense = attn + norms + dense_mlp_params(cfg, cfg.intermediate)
    moe_total = moe_active = expert = 0
    if cfg.is_moe:
        t, a = moe_params(cfg)
        moe_total, moe_active = attn + norms + t, attn + norms + a
        expert = dense_mlp_params(cfg, cfg.moe_intermediate)
    n_dense = cfg.layers - cfg.moe_layers
    emb, head = embedding_params(cfg), head_params(cfg)
    # hybrid models: the linear-attention layers carry their own projections instead of attention's
    n_linear = sum(1 for k in cfg.layer_kinds() if k[1] == "linear")
    swap = n_linear * (linear_attention_params(cfg) - attn) if n_linear else 0
    total = emb + head + n_dense * dense + cfg.moe_layers * moe_total + swap
    active = emb + head + n_dense * dense + cfg.moe_layers * moe_active + swap
    return ParamCount(total=total, active=active, embedding=emb, head=head, per_dense_layer=dense,
                      per_moe_layer=moe_total, per_moe_layer_active=moe_active, expert=expert, attention=attn)
