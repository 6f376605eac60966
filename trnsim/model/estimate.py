"""The model layer's public face: training and inference estimates, the zoo, parameter counts.

``estimate_training`` / ``estimate_inference`` take any system (a Trainium instance or UltraServer, a GPU
system: ``system.make_system``), ``costs: OpCosts`` (default: the system's own; the api layer injects
``SimulatedOpCosts`` on Trainium) and ``comm`` (default: the system's collective model, trnsim.fabric's closed
forms with its runtime constants; ``"fabric-sim"`` its flow simulator).
"""
from __future__ import annotations

from typing import Dict, List

from .config import ModelConfig, load_model, model_names, zoo
from .infer import estimate_inference
from .params import count_params
from .results import InferenceEstimate, ServingEstimate, TrainingEstimate
from .train import estimate_training


def list_models() -> List[Dict]:
    """Every zoo model with its computed and published parameter counts."""
    out = []
    for name, cfg in sorted(zoo().items()):
        pc = count_params(cfg)
        out.append(dict(name=name, family=cfg.family, params=pc.total, active_params=pc.active,
                        published_params=cfg.published_params, published_active_params=cfg.published_active_params,
                        layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, kv_heads=cfg.n_kv,
                        experts=cfg.experts, top_k=cfg.top_k, source=cfg.source))
    return out


__all__ = ["InferenceEstimate", "ModelConfig", "ServingEstimate", "TrainingEstimate", "count_params",
           "estimate_inference", "estimate_training", "list_models", "load_model", "model_names"]
