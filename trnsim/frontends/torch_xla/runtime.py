"""``torch_xla.runtime`` basics: device type, world size, ordinals, SPMD off."""
from __future__ import annotations

from . import xla_model as _xm


def device_type() -> str:
    """The PJRT device type of the (simulated) accelerator."""
    return "NEURON"


def world_size() -> int:
    """Ranks of the launch."""
    return _xm.xrt_world_size()


def global_ordinal() -> int:
    """This process's global rank."""
    return _xm.get_ordinal()


def local_ordinal() -> int:
    """This process's rank on its instance."""
    return _xm.get_local_ordinal()


def process_index() -> int:
    """Same as the global rank (one process per NeuronCore)."""
    return _xm.get_ordinal()


def process_count() -> int:
    """Processes of the launch."""
    return _xm.xrt_world_size()


def addressable_device_count() -> int:
    """Devices this process drives: one NeuronCore."""
    return 1


def global_runtime_device_count() -> int:
    """Devices of the whole launch."""
    return _xm.xrt_world_size()


def use_spmd(auto: bool = False) -> None:
    """SPMD is not simulated: each rank is costed as a data-parallel replica."""


def is_spmd() -> bool:
    """SPMD is never on under trnsim."""
    return False
