"""Collective timing for the estimators: the ``CommModel`` protocol and the one route to the collective model.

Every collective an estimate charges is one ``time_s`` call into ``trnsim.fabric.FabricComm`` with the
fabric's runtime constants on (launch cost, bandwidth efficiency): exactly what ``trnsim collective`` prints.
No comm factor or per-call overhead is added on the model side.  Size convention as nccl-tests: the
all-reduce buffer, the all-gather output, the reduce-scatter input, the all-to-all total per rank.
"""
from __future__ import annotations

from typing import Optional, Protocol, Sequence, runtime_checkable

from ..errors import ConfigError

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast")
COMM_MODELS = ("fabric", "fabric-sim")
DEFAULT_COMM = "fabric"


@runtime_checkable
class CommModel(Protocol):
    """Anything that times a collective over a set of ranks (logical NeuronCores or GPUs)."""
    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds for collective ``op`` of ``size_bytes`` over ``ranks``."""
        ...


def default_comm(system, hardware_file: Optional[str] = None, which: str = DEFAULT_COMM) -> CommModel:
    """The collective model by name: ``fabric`` (closed forms, default) or ``fabric-sim`` (flow simulator)."""
    if which not in COMM_MODELS:
        raise ConfigError(f"unknown collectives model {which!r}", rule="comm-model", limit=COMM_MODELS,
                          value=which)
    return system.collectives(hardware_file, simulate=which == "fabric-sim")
