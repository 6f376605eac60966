"""The torch front end: compatibility dry run of a PyTorch model (``check_model``) and its graph as
trnsim ``Op`` records (``to_ops``).  torch is an optional extra; nothing here imports it until called."""
from __future__ import annotations

from .errors import CaptureError, ModelLoadError, TorchMissingError, require_torch

__all__ = ["check_model", "to_ops", "CompatReport", "CaptureError", "ModelLoadError", "TorchMissingError",
           "require_torch"]


def __getattr__(name):  # lazy: importing the package must work without torch
    if name == "check_model":
        from .check import check_model
        return check_model
    if name == "to_ops":
        from .graph_ops import to_ops
        return to_ops
    if name == "CompatReport":
        from .report import CompatReport
        return CompatReport
    raise AttributeError(name)
