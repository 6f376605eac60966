"""Hugging Face ``config.json`` of the serving-era families, key by key: llama4, gpt_oss, afmoe, qwen3_next,
qwen3_5 and qwen3_5_moe. A family whose layers trnsim has no cost model for is named in ``UNMODELLED`` with
the missing piece, so it is refused with that reason rather than approximated silently."""
from __future__ import annotations

from typing import Any, Callable, Dict

NEW_FAMILIES = ("llama4", "llama4_text", "gpt_oss", "afmoe", "qwen3_next", "qwen3_5", "qwen3_5_text",
                "qwen3_5_moe", "qwen3_5_moe_text")

# model_type -> the layer kind trnsim cannot cost
UNMODELLED = {
    "mamba": "selective state-space (Mamba) layers",
    "mamba2": "selective state-space (Mamba-2) layers",
    "falcon_h1": "parallel Mamba-2 heads beside attention",
    "jamba": "Mamba layers interleaved with attention",
    "nemotron_h": "Mamba-2 layers interleaved with attention",
    "zamba2": "shared-attention Mamba-2 blocks",
    "minimax": "lightning (linear) attention layers with their decay schedule",
    "minimax_m1": "lightning (linear) attention layers with their decay schedule",
    "rwkv": "RWKV time-mixing recurrences",
    "rwkv7": "RWKV time-mixing recurrences",
    "recurrent_gemma": "RG-LRU recurrent blocks",
    "xlstm": "mLSTM / sLSTM recurrent blocks",
}


def from_new_family(d: Dict[str, Any], mt: str, name: str, origin: str, get: Callable):
    """ModelConfig of one of NEW_FAMILIES (``get`` reads and type-checks one key, as hf._get does)."""
    from .spec import ModelConfig, ModelConfigError, validate
    if mt in ("llama4", "qwen3_5", "qwen3_5_moe"):
        # the multimodal checkpoints nest the language model's keys under text_config
        t = d.get("text_config")
        if not isinstance(t, dict):
            raise ModelConfigError(f"{origin}: model_type {mt!r} needs a text_config object",
                                   rule="model-config-key", value="text_config")
        top = d
        d = dict(t)
        d.setdefault("tie_word_embeddings", top.get("tie_word_embeddings", False))
        d.setdefault("quantization_config", top.get("quantization_config"))
    g = lambda k, kind=int, default=None: get(d, k, origin, kind, default)  # noqa: E731
    heads = g("num_attention_heads")
    kw: Dict[str, Any] = dict(
        name=name, family=mt.replace("_text", ""), source=origin, hidden=g("hidden_size"),
        layers=g("num_hidden_layers"), heads=heads, kv_heads=g("num_key_value_heads", int, heads),
        vocab=g("vocab_size"), max_position=g("max_position_embeddings", int, 2048),
        tied_embeddings=g("tie_word_embeddings", bool, False), mlp="swiglu", norm="rmsnorm", position="rope")
    if d.get("head_dim") is not None:
        kw["head_dim"] = g("head_dim")
    rope = d.get("rope_parameters") if isinstance(d.get("rope_parameters"), dict) else {}
    kw["rope_theta"] = float(rope.get("rope_theta", d.get("rope_theta", 10000.0)) or 10000.0)
    fam = kw["family"]
    if fam == "llama4":
        # experts and the shared expert are intermediate_size wide; the dense layers intermediate_size_mlp
        kw.update(intermediate=g("intermediate_size_mlp", int, g("intermediate_size")),
                  experts=g("num_local_experts"), top_k=g("num_experts_per_tok"), shared_experts=1,
                  moe_intermediate=g("intermediate_size"), moe_layer_step=g("interleave_moe_layer_step", int, 1),
                  attention_chunk=g("attention_chunk_size", int, 0))
        if kw["attention_chunk"]:   # every 4th layer is a global (NoPE) layer, the others chunked
            kw["full_attention_every"] = 4
    elif fam == "gpt_oss":
        kw.update(intermediate=g("intermediate_size"), experts=g("num_local_experts"),
                  top_k=g("num_experts_per_tok", int, g("experts_per_token", int, 0) or None),
                  moe_intermediate=g("intermediate_size"), sliding_window=g("sliding_window", int, 0),
                  attention_sinks=True, bias=True)
        kinds = d.get("layer_types") or []
        kw["full_attention_every"] = _every(kinds, "full_attention", 2)
        q = d.get("quantization_config") or {}
        if isinstance(q, dict) and q.get("quant_method") == "mxfp4":
            kw["expert_format"] = "mxfp4"
    elif fam == "afmoe":
        kw.update(intermediate=g("intermediate_size"), experts=g("num_experts"), top_k=g("num_experts_per_tok"),
                  moe_intermediate=g("moe_intermediate_size"), shared_experts=g("num_shared_experts", int, 0),
                  dense_layers=g("num_dense_layers", int, 0), sliding_window=g("sliding_window", int, 0),
                  full_attention_every=g("global_attn_every_n_layers", int, 0))
    else:   # qwen3_next, qwen3_5(_moe): gated-delta-rule layers, every full_attention_interval-th full
        moe = "num_experts" in d and (d.get("num_experts") or 0) > 0
        kw.update(qk_norm=True, attn_output_gate=bool(d.get("attn_output_gate", True)),
                  full_attention_every=g("full_attention_interval", int, 4),
                  linear_key_heads=g("linear_num_key_heads"), linear_value_heads=g("linear_num_value_heads"),
                  linear_key_dim=g("linear_key_head_dim"), linear_value_dim=g("linear_value_head_dim"),
                  linear_conv=g("linear_conv_kernel_dim", int, 4))
        if moe:
            si = g("shared_expert_intermediate_size", int, 0)
            kw.update(intermediate=g("intermediate_size", int, g("moe_intermediate_size")),
                      experts=g("num_experts"), top_k=g("num_experts_per_tok"),
                      moe_intermediate=g("moe_intermediate_size"), shared_experts=1 if si else 0,
                      shared_expert_intermediate=si)
        else:
            kw["intermediate"] = g("intermediate_size")
    cfg = ModelConfig(**kw)
    validate(cfg, origin)
    return cfg


def _every(kinds, full: str, default: int) -> int:
    """The period of ``full`` layers in a layer_types list (every n-th, counted from 1)."""
    idx = [i for i, k in enumerate(kinds) if k == full]
    if not idx:
        return default
    return idx[0] + 1
