"""Per-op costs from simulated reference kernels: a grid of kernel shapes timed on the timing model,
cached in SQLite under the user's cache directory, interpolated between shapes.

The kernels and their timer live above the model layer (``trnsim.kernels.time_reference``); the
caller passes the timer in, so this package never imports a front end.
"""
from .cache import CostCache, default_cache_dir
from .grids import Axis, KernelGrid, load_grids
from .keys import hardware_hash
from .select import IMPLS, KernelCall, attention_calls, kernel_call, kernel_calls
from .table import SimulatedOpCosts

__all__ = ["IMPLS", "Axis", "CostCache", "KernelCall", "KernelGrid", "SimulatedOpCosts", "attention_calls",
           "default_cache_dir", "hardware_hash", "kernel_call", "kernel_calls", "load_grids"]
