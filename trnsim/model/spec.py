"""A model architecture as a checked record: ``ModelConfig``, its errors, and reading it from a mapping.

The zoo and config files are read by ``config`` (TOML) and ``hf`` (Hugging Face config.json), both above this.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Dict

from ..errors import ConfigError

class ModelConfigError(ConfigError):
    """A model name, zoo file or config.json the estimator cannot use."""
    rule = "model-config"


@dataclass(frozen=True)
class ModelConfig:
    """A transformer's architecture: enough to build its op graph and count its parameters."""
    name: str
    hidden: int
    layers: int
    heads: int
    vocab: int
    intermediate: int
    kv_heads: int = 0                 # 0 = heads (MHA)
    head_dim: int = 0                 # 0 = hidden // heads
    family: str = "llama"
    mlp: str = "swiglu"               # "swiglu" | "gelu"
    norm: str = "rmsnorm"             # "rmsnorm" | "layernorm"
    position: str = "rope"            # "rope" | "learned"
    tied_embeddings: bool = False
    bias: bool = False
    causal: bool = True               # False for encoders (BERT)
    max_position: int = 2048
    rope_theta: float = 10000.0
    sliding_window: int = 0
    qk_norm: bool = False
    type_vocab: int = 0
    # mixture of experts
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    moe_intermediate: int = 0
    dense_layers: int = 0             # leading dense layers before the MoE ones (DeepSeek)
    moe_layer_step: int = 1           # after them, every n-th layer is MoE, the others dense (Llama 4: 2)
    shared_expert_intermediate: int = 0   # width of the shared expert(s) when not moe_intermediate (Qwen3-Next)
    expert_format: str = ""           # experts stored in another format than the rest ("mxfp4": gpt-oss)
    # layer pattern: every n-th layer attends over all positions, the others are local (0 = all alike)
    full_attention_every: int = 0
    attention_chunk: int = 0          # local layers attend within fixed chunks of this many tokens (Llama 4)
    attention_sinks: bool = False     # a learned sink logit per head (gpt-oss): one more softmax column
    attn_output_gate: bool = False    # a sigmoid gate of the attention output, projected beside Q (Qwen3.5)
    # linear-attention (gated delta rule) layers of hybrid models; the local layers when linear_value_heads > 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv: int = 0
    # multi-head latent attention (DeepSeek-V3); 0 = ordinary attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # provenance
    source: str = ""
    params_source: str = ""
    published_params: float = 0.0
    published_active_params: float = 0.0
    note: str = ""

    @property
    def n_kv(self) -> int:
        """Number of KV heads (heads when the model is MHA)."""
        return self.kv_heads or self.heads

    @property
    def hd(self) -> int:
        """Head dimension."""
        return self.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is DeepSeek's multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Number of MoE layers (after the leading dense ones, every ``moe_layer_step``-th)."""
        return sum(1 for k in self.layer_kinds() if k[0])

    @property
    def is_hybrid(self) -> bool:
        """Whether the local layers are linear-attention (gated delta rule) layers."""
        return self.linear_value_heads > 0

    def layer_kinds(self) -> tuple:
        """(moe, attention, window) of every layer: attention is "full", "window" (sliding window or
        chunk of ``window`` tokens) or "linear"."""
        return _layer_kinds(self)

    def to_dict(self) -> dict:
        """Every field as a plain dict."""
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=256)
def _layer_kinds(self: ModelConfig) -> tuple:
    """Memoised ModelConfig.layer_kinds (a frozen config is hashable)."""
    out = []
    local_w = self.sliding_window or self.attention_chunk
    for i in range(self.layers):
        moe = self.is_moe and i >= self.dense_layers and (i - self.dense_layers + 1) % self.moe_layer_step == 0
        full = self.full_attention_every and (i + 1) % self.full_attention_every == 0
        if full or (not self.full_attention_every and not self.sliding_window):
            attn, w = "full", 0
        elif self.is_hybrid:
            attn, w = "linear", 0
        elif local_w:
            attn, w = "window", local_w
        else:
            attn, w = "full", 0
        out.append((bool(moe), attn, w))
    return tuple(out)


_FIELDS = {f.name: f for f in dataclasses.fields(ModelConfig)}
_REQUIRED = ("name", "hidden", "layers", "heads", "vocab", "intermediate")


def from_mapping(d: Dict, origin: str) -> ModelConfig:
    """Build a ModelConfig from a zoo table, checking names and types of every key."""
    for k in _REQUIRED:
        if k not in d:
            raise ModelConfigError(f"{origin}: missing key {k!r}", rule="model-config-key", value=k)
    kwargs = {}
    for k, v in d.items():
        f = _FIELDS.get(k)
        if f is None:
            raise ModelConfigError(f"{origin}: unknown key {k!r}", rule="model-config-key",
                                   limit=sorted(_FIELDS), value=k)
        kwargs[k] = _coerce(v, f.type, k, origin)
    cfg = ModelConfig(**kwargs)
    validate(cfg, origin)
    return cfg


def _coerce(v, typ, key: str, origin: str):
    want = {"int": int, "float": float, "bool": bool, "str": str}.get(str(typ), None)
    if want is int and isinstance(v, float) and v.is_integer():
        v = int(v)
    if want is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if want is not None and (not isinstance(v, want) or (want is int and isinstance(v, bool))):
        raise ModelConfigError(f"{origin}: key {key!r} must be {want.__name__}", rule="model-config-type",
                               limit=want.__name__, value=repr(v))
    return v


def validate(cfg: ModelConfig, origin: str) -> None:
    """Shape rules every architecture must satisfy (positive sizes, heads dividing hidden...)."""
    for k in ("hidden", "layers", "heads", "vocab", "intermediate"):
        if getattr(cfg, k) <= 0:
            raise ModelConfigError(f"{origin}: {k} must be positive", rule="model-config-range",
                                   limit="> 0", value=getattr(cfg, k))
    if cfg.n_kv <= 0 or cfg.heads % cfg.n_kv:
        raise ModelConfigError(f"{origin}: kv_heads must divide heads ({cfg.heads})",
                               rule="model-config-range", limit=f"a divisor of {cfg.heads}", value=cfg.kv_heads)
    if not cfg.head_dim and cfg.hidden % cfg.heads and not cfg.is_mla:
        raise ModelConfigError(f"{origin}: heads must divide hidden ({cfg.hidden}) when head_dim is not given",
                               rule="model-config-range", limit=f"a divisor of {cfg.hidden}", value=cfg.heads)
    if cfg.mlp not in ("swiglu", "gelu"):
        raise ModelConfigError(f"{origin}: mlp must be swiglu or gelu", rule="model-config-range",
                               limit=("swiglu", "gelu"), value=cfg.mlp)
    if cfg.moe_layer_step < 1 or cfg.full_attention_every < 0:
        raise ModelConfigError(f"{origin}: moe_layer_step must be >= 1 and full_attention_every >= 0",
                               rule="model-config-range", limit=">= 1 / >= 0",
                               value=(cfg.moe_layer_step, cfg.full_attention_every))
    if cfg.is_hybrid and min(cfg.linear_key_heads, cfg.linear_key_dim, cfg.linear_value_dim) <= 0:
        raise ModelConfigError(f"{origin}: linear-attention layers need linear_key_heads, linear_key_dim and "
                               "linear_value_dim", rule="model-config-range", limit="> 0",
                               value=(cfg.linear_key_heads, cfg.linear_key_dim, cfg.linear_value_dim))
    if cfg.expert_format not in ("", "mxfp4", "mxfp8", "fp8"):
        raise ModelConfigError(f"{origin}: expert_format must be mxfp4, mxfp8 or fp8", rule="model-config-range",
                               limit=("mxfp4", "mxfp8", "fp8"), value=cfg.expert_format)
    if cfg.is_moe and not (0 < cfg.top_k <= cfg.experts and cfg.moe_intermediate > 0):
        raise ModelConfigError(f"{origin}: an MoE model needs 0 < top_k <= experts and moe_intermediate > 0",
                               rule="model-config-range", limit=f"1..{cfg.experts}", value=cfg.top_k)
