"""The ``torch_xla`` top-level module: ``device()``, ``sync()``, ``step()`` and the version, over the CPU."""
from __future__ import annotations

import contextlib

from . import xla_model as _xm

__version__ = "2.9.0+trnsim"   # the torch_xla API generation the shim follows (xm.* plus torch_xla.sync)


def device(index=None):
    """The device tensors go to (the CPU, where trnsim runs the computation)."""
    return _xm.xla_device()


def devices():
    """Devices of this process."""
    return [device()]


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """Same as ``xm.mark_step``: end of a graph."""
    _xm.mark_step()


@contextlib.contextmanager
def step():
    """``with torch_xla.step():`` one training step, ended by a ``sync`` on exit."""
    try:
        yield
    finally:
        sync()


def launch(fn, args=(), start_method: str = "spawn", debug_single_process: bool = False):
    """Run ``fn(index, *args)`` once per rank (torchrun already made the processes: run it here)."""
    return fn(_xm.get_ordinal(), *args)
