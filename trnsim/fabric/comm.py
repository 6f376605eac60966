"""``FabricComm``: the interface the model layer costs its collectives through."""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from .collectives import canonical_op, collective
from .topology import build_topology


class FabricComm:
    """Collective times on one system (``instances`` copies joined by EFA) at one LNC, memoized.

    Ranks are logical NeuronCore indices 0..N-1: core r lives on chip r // (cores_per_chip / lnc),
    instances numbered consecutively."""

    def __init__(self, system: str, instances: int = 1, lnc: int = 1, hardware_file: Optional[str] = None):
        self.topology = build_topology(system, instances, lnc, hardware_file)  # validates now, not later
        self.system = system
        self.instances = instances
        self.lnc = lnc
        self.hardware_file = hardware_file
        self._memo: Dict[Tuple[str, float, Tuple[int, ...]], float] = {}

    @property
    def n_ranks(self) -> int:
        """Logical cores of the whole system."""
        return self.topology.n_ranks

    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds for ``op`` with buffer ``size_bytes`` (nccl-tests convention) over ``ranks``."""
        key = (canonical_op(op), float(size_bytes), tuple(int(r) for r in ranks))
        t = self._memo.get(key)
        if t is None:
            if len(key[2]) <= 1:
                t = 0.0  # one rank: nothing to exchange
            else:
                res = collective(self.system, key[0], key[1], key[2], self.instances, None, self.lnc,
                                 self.hardware_file)
                t = res.time_us * 1e-6
            self._memo[key] = t
        return t
