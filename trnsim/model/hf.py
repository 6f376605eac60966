"""Hugging Face ``config.json`` <-> ModelConfig, key by key, for the families the estimator knows.

Families: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v3, gpt2, gpt_neox, bert, and the
serving families of ``hf_families``: llama4 (interleaved MoE layers, shared expert, chunked attention),
gpt_oss (sliding-window layers, attention sinks, MXFP4 experts), afmoe (shared-expert MoE, sliding-window
layers), qwen3_next / qwen3_5 / qwen3_5_moe (hybrid gated-delta-rule linear attention).
"""
from __future__ import annotations

from typing import Any, Dict

from .spec import ModelConfig, ModelConfigError, validate

from .hf_families import NEW_FAMILIES, UNMODELLED, from_new_family

LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3")
FAMILIES = LLAMA_LIKE + ("gpt2", "gpt_neox", "bert") + NEW_FAMILIES


def _get(d: Dict[str, Any], key: str, origin: str, kind=int, default=None):
    """d[key] checked for type; a missing key without default names itself."""
    if key not in d or d[key] is None:
        if default is not None:
            return default
        raise ModelConfigError(f"{origin}: missing key {key!r}", rule="model-config-key", value=key)
    v = d[key]
    if kind is int and isinstance(v, float) and v.is_integer():
        v = int(v)
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise ModelConfigError(f"{origin}: key {key!r} must be {kind.__name__}", rule="model-config-type",
                               limit=kind.__name__, value=repr(v))
    return v


def from_hf_config(d: Dict[str, Any], name: str = "model", origin: str = "config.json") -> ModelConfig:
    """Map a Hugging Face config.json dict onto a ModelConfig (no network, no transformers)."""
    if not isinstance(d, dict):
        raise ModelConfigError(f"{origin}: a config.json must hold a JSON object", rule="model-config-type",
                               value=type(d).__name__)
    mt = _get(d, "model_type", origin, str)
    if mt in UNMODELLED:
        raise ModelConfigError(f"{origin}: model_type {mt!r} cannot be modelled: trnsim has no model of "
                               f"{UNMODELLED[mt]}", rule="model-config-family", limit=FAMILIES, value=mt)
    if mt in NEW_FAMILIES:
        return from_new_family(d, mt, name, origin, _get)
    if mt not in FAMILIES:
        raise ModelConfigError(f"{origin}: model_type {mt!r} is not supported", rule="model-config-family",
                               limit=FAMILIES, value=mt)
    g = lambda k, kind=int, default=None: _get(d, k, origin, kind, default)  # noqa: E731
    kw: Dict[str, Any] = dict(name=name, family=mt, source=origin)
    if mt in LLAMA_LIKE:
        heads = g("num_attention_heads")
        kw.update(hidden=g("hidden_size"), layers=g("num_hidden_layers"), heads=heads,
                  kv_heads=g("num_key_value_heads", int, heads), vocab=g("vocab_size"),
                  intermediate=g("intermediate_size"), max_position=g("max_position_embeddings", int, 2048),
                  rope_theta=g("rope_theta", float, 10000.0),
                  tied_embeddings=g("tie_word_embeddings", bool, False),
                  bias=g("attention_bias", bool, False), mlp="swiglu", norm="rmsnorm", position="rope")
        if "head_dim" in d and d["head_dim"] is not None and mt != "deepseek_v3":
            kw["head_dim"] = g("head_dim")
        if mt == "mistral" and d.get("sliding_window"):
            kw["sliding_window"] = g("sliding_window")
        if mt in ("qwen3", "qwen3_moe"):
            kw["qk_norm"] = True
        if mt == "mixtral":
            kw.update(experts=g("num_local_experts"), top_k=g("num_experts_per_tok"),
                      moe_intermediate=kw["intermediate"])
        if mt == "qwen3_moe":
            kw.update(experts=g("num_experts"), top_k=g("num_experts_per_tok"),
                      moe_intermediate=g("moe_intermediate_size"))
        if mt == "deepseek_v3":
            kw.update(experts=g("n_routed_experts"), top_k=g("num_experts_per_tok"),
                      shared_experts=g("n_shared_experts", int, 0), moe_intermediate=g("moe_intermediate_size"),
                      dense_layers=g("first_k_dense_replace", int, 0), q_lora_rank=g("q_lora_rank", int, 0),
                      kv_lora_rank=g("kv_lora_rank"), qk_nope_head_dim=g("qk_nope_head_dim"),
                      qk_rope_head_dim=g("qk_rope_head_dim"), v_head_dim=g("v_head_dim"))
    elif mt == "gpt2":
        h = g("n_embd")
        kw.update(hidden=h, layers=g("n_layer"), heads=g("n_head"), vocab=g("vocab_size"),
                  intermediate=g("n_inner", int, 4 * h), max_position=g("n_positions", int, 1024),
                  tied_embeddings=True, bias=True, mlp="gelu", norm="layernorm", position="learned")
    elif mt == "gpt_neox":
        kw.update(hidden=g("hidden_size"), layers=g("num_hidden_layers"), heads=g("num_attention_heads"),
                  vocab=g("vocab_size"), intermediate=g("intermediate_size"),
                  max_position=g("max_position_embeddings", int, 2048),
                  tied_embeddings=g("tie_word_embeddings", bool, False), bias=True, mlp="gelu",
                  norm="layernorm", position="rope", rope_theta=g("rotary_emb_base", float, 10000.0))
    else:  # bert
        kw.update(hidden=g("hidden_size"), layers=g("num_hidden_layers"), heads=g("num_attention_heads"),
                  vocab=g("vocab_size"), intermediate=g("intermediate_size"),
                  max_position=g("max_position_embeddings", int, 512), type_vocab=g("type_vocab_size", int, 2),
                  tied_embeddings=True, bias=True, causal=False, mlp="gelu", norm="layernorm",
                  position="learned")
    cfg = ModelConfig(**kw)
    validate(cfg, origin)
    return cfg


def to_hf_config(cfg: ModelConfig) -> Dict[str, Any]:
    """The config.json a ModelConfig corresponds to (inverse of from_hf_config for its family)."""
    mt = cfg.family if cfg.family in FAMILIES else ("gpt2" if cfg.family == "gpt3" else "llama")
    if mt in LLAMA_LIKE:
        d: Dict[str, Any] = dict(model_type=mt, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                                 num_attention_heads=cfg.heads, num_key_value_heads=cfg.n_kv,
                                 vocab_size=cfg.vocab, intermediate_size=cfg.intermediate,
                                 max_position_embeddings=cfg.max_position, rope_theta=cfg.rope_theta,
                                 tie_word_embeddings=cfg.tied_embeddings, attention_bias=cfg.bias)
        if cfg.head_dim:
            d["head_dim"] = cfg.head_dim
        if cfg.sliding_window:
            d["sliding_window"] = cfg.sliding_window
        if mt == "mixtral":
            d.update(num_local_experts=cfg.experts, num_experts_per_tok=cfg.top_k)
        if mt == "qwen3_moe":
            d.update(num_experts=cfg.experts, num_experts_per_tok=cfg.top_k,
                     moe_intermediate_size=cfg.moe_intermediate)
        if mt == "deepseek_v3":
            d.update(n_routed_experts=cfg.experts, num_experts_per_tok=cfg.top_k,
                     n_shared_experts=cfg.shared_experts, moe_intermediate_size=cfg.moe_intermediate,
                     first_k_dense_replace=cfg.dense_layers, q_lora_rank=cfg.q_lora_rank,
                     kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_head_dim,
                     qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim)
        return d
    if mt == "gpt2":
        return dict(model_type="gpt2", n_embd=cfg.hidden, n_layer=cfg.layers, n_head=cfg.heads,
                    vocab_size=cfg.vocab, n_inner=cfg.intermediate, n_positions=cfg.max_position)
    if mt == "gpt_neox":
        return dict(model_type="gpt_neox", hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.heads, vocab_size=cfg.vocab, intermediate_size=cfg.intermediate,
                    max_position_embeddings=cfg.max_position, tie_word_embeddings=cfg.tied_embeddings,
                    rotary_emb_base=cfg.rope_theta)
    return dict(model_type="bert", hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                num_attention_heads=cfg.heads, vocab_size=cfg.vocab, intermediate_size=cfg.intermediate,
                max_position_embeddings=cfg.max_position, type_vocab_size=cfg.type_vocab)
