"""LoRA / PEFT fine-tuning: low-rank adapters on chosen projections of a frozen base model.

Each targeted projection W [d_in, d_out] gains A [d_in, r] and B [r, d_out]; only A and B are trained. Under
tensor parallelism the adapter follows its base layer (PEFT on NeuronX Distributed / Megatron): for a
column-parallel projection (q, k, v, gate, up) A is replicated and B split over TP; for a row-parallel one
(o, down) A is split and B replicated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple, Union

from ..errors import ConfigError
from .config import ModelConfig

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
ROW_PARALLEL = ("o", "down")
DEFAULT_TARGETS = ("q", "k", "v", "o")


class LoraError(ConfigError):
    """A LoRA rank or target list the estimator cannot use."""
    rule = "lora"


@dataclass(frozen=True)
class Lora:
    """Adapter rank and the projections it is applied to."""
    rank: int
    targets: Tuple[str, ...] = DEFAULT_TARGETS

    def to_dict(self) -> dict:
        """The settings as a dict."""
        return {"rank": self.rank, "targets": list(self.targets)}


def make_lora(rank: Optional[int], targets: Union[None, str, Iterable[str]] = None) -> Optional[Lora]:
    """A checked ``Lora`` from a rank and ``"q,k,v,o"`` (or a list); None when rank is None or 0."""
    if not rank:
        if targets:
            raise LoraError("--lora-targets needs --lora-rank", limit="a rank >= 1", value=rank)
        return None
    if int(rank) != rank or rank < 1:
        raise LoraError(f"LoRA rank must be a positive integer, got {rank!r}", limit=">= 1", value=rank)
    if targets is None:
        names = list(DEFAULT_TARGETS)
    else:
        names = [t.strip().lower() for t in (targets.split(",") if isinstance(targets, str) else targets)]
        names = [t for t in names if t]
    bad = [t for t in names if t not in TARGETS]
    if bad or not names:
        raise LoraError(f"unknown LoRA target(s) {bad or names}", limit=TARGETS, value=",".join(bad or names))
    ordered = tuple(t for t in TARGETS if t in names)
    return Lora(rank=int(rank), targets=ordered)


def projection_dims(cfg: ModelConfig, moe: bool = False) -> Dict[str, Tuple[int, int]]:
    """(d_in, d_out) of every LoRA-targetable projection of one layer (MoE layers: of one expert)."""
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        attn = {"q": (cfg.hidden, cfg.heads * qk),
                "k": (cfg.hidden, cfg.kv_lora_rank + cfg.qk_rope_head_dim),
                "v": (cfg.kv_lora_rank, cfg.heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)),
                "o": (cfg.heads * cfg.v_head_dim, cfg.hidden)}
    else:
        attn = {"q": (cfg.hidden, cfg.heads * cfg.hd), "k": (cfg.hidden, cfg.n_kv * cfg.hd),
                "v": (cfg.hidden, cfg.n_kv * cfg.hd), "o": (cfg.heads * cfg.hd, cfg.hidden)}
    inter = cfg.moe_intermediate if moe else cfg.intermediate
    mlp = {"up": (cfg.hidden, inter), "down": (inter, cfg.hidden)}
    if cfg.mlp == "swiglu":
        mlp["gate"] = (cfg.hidden, inter)
    return {**attn, **mlp}


def _per_core(rank: int, name: str, d_in: int, d_out: int, tp: int) -> float:
    """Adapter parameters of one projection on one TP rank."""
    if name in ROW_PARALLEL:
        return rank * d_in / tp + rank * d_out
    return rank * d_in + rank * d_out / tp


def adapter_params(cfg: ModelConfig, lora: Lora, tp: int = 1, moe: bool = False, experts: float = 1.0) -> float:
    """Adapter parameters of one layer on one TP rank (MLP targets of an MoE layer: per local expert x
    ``experts``). A target the architecture lacks (gate on a GELU MLP) adds nothing."""
    dims = projection_dims(cfg, moe)
    total = 0.0
    for t in lora.targets:
        if t not in dims:
            continue
        n = experts if (moe and t in ("gate", "up", "down")) else 1.0
        total += n * _per_core(lora.rank, t, *dims[t], tp)
    return total


def adapter_params_total(cfg: ModelConfig, lora: Lora) -> float:
    """All adapter parameters of the model (the trainable count PEFT prints)."""
    dense = cfg.layers - cfg.moe_layers
    moe = adapter_params(cfg, lora, 1, moe=True, experts=cfg.experts + cfg.shared_experts) if cfg.is_moe else 0.0
    return dense * adapter_params(cfg, lora) + cfg.moe_layers * moe


def adapter_matmuls(cfg: ModelConfig, lora: Lora, T: int, tp: int, moe: bool = False,
                    expert_tokens: int = 0, local_experts: int = 1) -> List[Tuple[str, int, int, int, int]]:
    """(name, m, k, n, batch) of the forward adapter matmuls of one layer: x A then (x A) B per target.
    MoE MLP targets run per local expert over its ``expert_tokens``."""
    dims = projection_dims(cfg, moe)
    out = []
    for t in lora.targets:
        if t not in dims:
            continue
        d_in, d_out = dims[t]
        m, batch = T, 1
        if moe and t in ("gate", "up", "down"):
            m, batch = max(1, expert_tokens), max(1, local_experts)
        if t in ROW_PARALLEL:
            d_in = max(1, d_in // tp)
        else:
            d_out = max(1, d_out // tp)
        out.append((f"lora.{t}.a", m, d_in, lora.rank, batch))
        out.append((f"lora.{t}.b", m, lora.rank, d_out, batch))
    return out


def adapters_for_matmul(op, rank: int) -> list:
    """Forward adapter matmuls (x A, then (x A) B) for one weight matmul of a captured graph, whose targets
    are not named: PEFT's ``all-linear`` choice, an adapter on every linear layer."""
    from .ops import Op
    a = op.bytes / max(1.0, op.batch * (op.m * op.k + op.k * op.n + op.m * op.n)) if op.bytes else 2.0
    mk = lambda name, m, k, n: Op(kind="matmul", name=f"{op.name}.{name}", dtype=op.dtype, m=m, k=k, n=n,  # noqa: E731
                                  batch=op.batch, flops=2.0 * m * k * n * op.batch,
                                  bytes=op.batch * (m * k + k * n + m * n) * a)
    return [mk("lora_a", op.m, op.k, rank), mk("lora_b", op.m, rank, op.n)]
