"""Let GPU-placed model code trace on the meta device: ``.cuda()``, ``.to("cuda")`` and ``device="cuda"``
become no-ops / ``meta`` while a capture runs (the AST scan reports those lines separately)."""
from __future__ import annotations

from typing import Any


def _is_cuda(d: Any) -> bool:
    import torch
    return (isinstance(d, str) and d.startswith("cuda")) or (isinstance(d, torch.device) and d.type == "cuda")


def cuda_to_meta_mode():
    """A ``TorchFunctionMode`` that keeps every tensor on the meta device whatever device the code names."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaToMeta(TorchFunctionMode):
        """Redirect CUDA placement to meta at the Python API level, before torch checks for a GPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = "meta"
            if func is torch.Tensor.to:
                args = tuple("meta" if _is_cuda(a) else a for a in args)
            return func(*args, **kwargs)

    return CudaToMeta()
