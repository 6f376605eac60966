"""Model architectures as data: the zoo (one TOML per model) and Hugging Face ``config.json`` files.

No network and no ``transformers``: a config.json is read as JSON and mapped key by key; a missing or
malformed key is a ConfigError naming it.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from ..errors import ConfigError

ZOO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")


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


# ------------------------------------------------------------------------------------ the zoo
@functools.lru_cache(maxsize=1)
def zoo() -> Dict[str, ModelConfig]:
    """Every built-in model, by name."""
    out = {}
    for f in sorted(os.listdir(ZOO_DIR)):
        if f.endswith(".toml"):
            path = os.path.join(ZOO_DIR, f)
            with open(path, "rb") as fh:
                cfg = from_mapping(_toml.load(fh), path)
            out[cfg.name] = cfg
    return out


def model_names() -> List[str]:
    """Names of the built-in models, sorted."""
    return sorted(zoo())


def load_model(name_or_path: str) -> ModelConfig:
    """A zoo model by name, or a Hugging Face config.json / zoo-style TOML by path."""
    if os.path.exists(name_or_path) or name_or_path.endswith((".json", ".toml")):
        return load_file(name_or_path)
    models = zoo()
    key = name_or_path.strip().lower()
    if key in models:
        return models[key]
    near = difflib.get_close_matches(key, list(models), n=3, cutoff=0.5)
    raise ModelConfigError(f"unknown model {name_or_path!r}", rule="model-name", limit="trnsim models",
                           value=name_or_path,
                           hint=("did you mean " + ", ".join(near) + "?") if near else
                           "run `trnsim models` for the list, or pass a config.json path")


def load_file(path: str) -> ModelConfig:
    """Read a config.json (Hugging Face) or a zoo-style TOML file."""
    if not os.path.isfile(path):  # a folder is no config file either
        raise ModelConfigError(f"model config file not found: {path}", rule="model-config-file", value=path)
    if path.endswith(".toml"):
        with open(path, "rb") as fh:
            try:
                return from_mapping(_toml.load(fh), path)
            except _toml.TOMLDecodeError as e:
                raise ModelConfigError(f"{path} is not valid TOML: {e}", rule="model-config-syntax",
                                       value=path) from None
    with open(path, encoding="utf-8") as fh:
        try:
            d = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelConfigError(f"{path} is not valid JSON: {e}", rule="model-config-syntax",
                                   value=path) from None
    from .hf import from_hf_config
    name = os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"
    return from_hf_config(d, name=name, origin=path)


def suggest(name: str) -> Optional[str]:
    """Nearest zoo name to ``name`` or None."""
    near = difflib.get_close_matches(name.lower(), model_names(), n=1, cutoff=0.5)
    return near[0] if near else None
