"""Model-level estimates: zoo, op graphs, parallelism, memory fit, training and inference time."""
from .captured import OpsEstimate, estimate_ops
from .comm import CommModel
from .config import ModelConfig, load_model, model_names
from .estimate import list_models
from .infer import estimate_inference
from .neuron import ServingSetup, Speculation
from .ops import Op, OpCosts, OpTime, RooflineOpCosts
from .params import count_params
from .results import InferenceEstimate, ServingEstimate, TrainingEstimate
from .system import SystemModel, make_system
from .train import estimate_training

__all__ = ["CommModel", "InferenceEstimate", "ModelConfig", "Op", "OpCosts", "OpTime",
           "OpsEstimate", "RooflineOpCosts", "ServingEstimate", "ServingSetup", "Speculation", "SystemModel", "TrainingEstimate", "count_params",
           "estimate_inference", "estimate_ops", "estimate_training", "list_models", "load_model", "make_system", "model_names"]
