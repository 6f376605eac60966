"""``torch_xla.amp``: ``autocast`` and ``GradScaler`` over CPU torch's own (bf16 autocast runs for real on
the CPU, so the recorded matmuls carry the dtype Trainium would run them in)."""
from __future__ import annotations

import torch


def autocast(device=None, enabled: bool = True, dtype=None, cache_enabled: bool = True):
    """Mixed precision for the ops inside (BF16 by default, as on Trainium)."""
    return torch.autocast("cpu", enabled=enabled, dtype=dtype or torch.bfloat16, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """Loss scaling (needed for fp16, harmless for bf16), on the CPU device."""

    def __init__(self, *args, **kwargs):
        kwargs.pop("use_zero_grad", None)
        super().__init__("cpu", *args, **kwargs)


__all__ = ["GradScaler", "autocast"]
