"""The ``torch_xla`` face: a migrated PyTorch/XLA training script runs unchanged on the CPU while trnsim
records each graph between ``mark_step``s and prints its estimated Trainium step time.

``public_modules()`` is what the import shim (``trnsim exec``) puts into ``sys.modules``; recording starts
when ``trnsim exec --instance`` set ``TRNSIM_XLA_INSTANCE``.  Nothing here imports torch until called.
"""
from __future__ import annotations

import importlib
import types
from typing import Dict

# public module name -> trnsim module (None: a package holding only its submodules)
PUBLIC = {
    "torch_xla": "top",
    "torch_xla.core": None,
    "torch_xla.core.xla_model": "xla_model",
    "torch_xla.amp": "amp",
    "torch_xla.runtime": "runtime",
    "torch_xla.distributed": None,
    "torch_xla.distributed.xla_backend": "distributed",
    "torch_xla.distributed.parallel_loader": "distributed",
    "torch_xla.distributed.xla_multiprocessing": "distributed",
    "torch_xla.debug": None,
    "torch_xla.debug.metrics": "metrics",
}


def public_modules() -> Dict[str, types.ModuleType]:
    """Every public ``torch_xla`` module name -> the module serving it, parents wired to children."""
    out: Dict[str, types.ModuleType] = {}
    for name, impl in PUBLIC.items():
        if impl is None:
            m = types.ModuleType(name, f"trnsim's stand-in for {name}")
            m.__path__ = []  # a package, so submodule imports resolve through sys.modules
        else:
            m = importlib.import_module(f"{__name__}.{impl}")
        out[name] = m
    for name, m in out.items():
        parent, _, child = name.rpartition(".")
        if parent in out:
            setattr(out[parent], child, m)
    return out


def activate() -> None:
    """What importing the shim does besides aliasing: the ``xla`` backend, and recording if asked for."""
    from .distributed import register
    from .session import start_from_env
    register()
    start_from_env()
