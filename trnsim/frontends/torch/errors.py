"""Errors of the torch front end, all in the TrnsimError family (a user never sees a traceback)."""
from __future__ import annotations

from ...errors import ConfigError, TrnsimError

INSTALL_HINT = "pip install 'trnsim[torch]'  (a CPU build of torch is enough: capture runs on the meta device)"


class TorchMissingError(TrnsimError):
    """The optional ``torch`` extra is not installed."""
    rule = "torch-extra"


class ModelLoadError(ConfigError):
    """The model file, class or constructor arguments cannot be used."""
    rule = "model-load"


class CaptureError(TrnsimError):
    """The model does not trace on the meta device, by torch.export nor by the dispatch fallback."""
    rule = "capture"


def require_torch():
    """Import and return torch, or raise ``TorchMissingError`` saying how to install it."""
    try:
        import torch
    except ImportError as e:
        raise TorchMissingError("trnsim check needs PyTorch, which is not installed", rule="torch-extra",
                                limit="torch installed", value=f"import torch failed: {e}",
                                hint=INSTALL_HINT) from None
    return torch
