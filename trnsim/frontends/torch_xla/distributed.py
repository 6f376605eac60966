"""``torch_xla.distributed``: the ``xla`` process-group backend and ``xla://`` init method (gloo on the CPU
underneath, rendezvous from torchrun's environment), ``MpDeviceLoader`` and ``xla_multiprocessing.spawn``.

One module serves ``torch_xla.distributed.xla_backend``, ``.parallel_loader`` and ``.xla_multiprocessing``.
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Iterator, Optional

from . import xla_model as _xm
from .xla_model import init_default_group  # noqa: F401  (torch_xla.distributed exports it)

_registered = False


def _make_gloo(store, rank, size, timeout):
    from torch.distributed import ProcessGroupGloo
    return ProcessGroupGloo(store, rank, size, timeout)


def _xla_rendezvous(url: str, timeout=None, **kwargs):
    """``xla://``: the same rendezvous as ``env://`` (torchrun sets MASTER_ADDR / PORT, RANK, WORLD_SIZE)."""
    r = importlib.import_module("torch.distributed.rendezvous")
    kw = {"timeout": timeout} if timeout is not None else {}
    return r._env_rendezvous_handler("env://" + url[len("xla://"):], **kw, **kwargs)


def register() -> None:
    """Register the ``xla`` backend (a gloo group) and the ``xla://`` init method with torch (idempotent)."""
    global _registered
    if _registered:
        return
    import torch.distributed as dist
    if not dist.is_available():  # pragma: no cover - CPU wheels ship distributed
        return
    if "xla" not in dist.Backend.backend_list:
        dist.Backend.register_backend("xla", _make_gloo, devices=["cpu"])
    r = importlib.import_module("torch.distributed.rendezvous")
    if "xla" not in r._rendezvous_handlers:
        r.register_rendezvous_handler("xla", _xla_rendezvous)
    _registered = True


class XlaBackend:
    """Name of the process-group backend class (``dist.init_process_group('xla')`` makes a gloo group)."""


class MpDeviceLoader:
    """Wraps a data loader; like torch_xla's, it ends a step (``mark_step``) each time it hands a new batch."""

    def __init__(self, loader, device=None, **kwargs):
        self._loader = loader
        self.device = device
        self.batches_per_execution = int(kwargs.get("batches_per_execution", 1))

    def __iter__(self) -> Iterator[Any]:
        for i, batch in enumerate(self._loader):
            if i and i % self.batches_per_execution == 0:
                _xm.mark_step()
            yield batch
        _xm.mark_step()

    def __len__(self) -> int:
        return len(self._loader)


class ParallelLoader:
    """``ParallelLoader(loader, devices).per_device_loader(device)``: the same as ``MpDeviceLoader``."""

    def __init__(self, loader, devices=None, **kwargs):
        self._loader = loader

    def per_device_loader(self, device=None) -> MpDeviceLoader:
        """The loader of one device."""
        return MpDeviceLoader(self._loader, device)


def _spawned(index: int, fn: Callable, nprocs: int, port: str, args: tuple) -> None:
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE=str(nprocs),
                      MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"), MASTER_PORT=port)
    from . import session
    session.start_from_env()
    fn(index, *args)


def spawn(fn: Callable, args: tuple = (), nprocs: Optional[int] = None, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Run ``fn(index, *args)`` in ``nprocs`` processes (one rank each); one process runs in-line."""
    if not nprocs or nprocs == 1:
        return fn(0, *args)
    import torch.multiprocessing as mp
    port = os.environ.get("MASTER_PORT", "29517")
    return mp.start_processes(_spawned, args=(fn, nprocs, port, args), nprocs=nprocs, join=join, daemon=daemon,
                              start_method=start_method)
