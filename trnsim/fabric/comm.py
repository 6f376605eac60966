"""``FabricComm``: the interface the model layer costs its collectives through.

Default fast path: every algorithm that can run (op, ranks) is reduced once to time = A + B x size by its
busiest links (``closed_form.algorithm_coefficients``), memoized per (op, ranks); a new size then costs a
min over a handful of candidates.  ``simulate=True`` (and any rank set that is not a regular grid over the
topology's axes) runs the flow-level simulator instead, memoized per (op, size, ranks)."""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Dict, Optional, Sequence, Tuple

from .algorithms import ALGORITHMS
from . import fast
from .collectives import canonical_op, runtime_schedule
from .config import load_fabric_config
from .gpu import build_gpu_topology, gpu_system_key, nccl_time
from .runtime import group_topology
from .schedule import RankSet
from .topology import build_topology


class FabricComm:
    """Collective times on one system (``instances`` copies joined by EFA) at one LNC, memoized.

    Ranks are logical NeuronCore indices 0..N-1: core r lives on chip r // (cores_per_chip / lnc),
    instances numbered consecutively.  The runtime picks the algorithm class by message size (mesh, RDH,
    rings) and pays its costs (fabric.toml [runtime.<chip>]): inside a compiled graph (``in_graph``, how a
    model's collectives run) one fixed cost per call; launched on its own (``in_graph=False``, as nccom-test
    runs it) a launch and a cost per message.  On a GPU system (gpus.toml) ranks are GPU indices, the GPUs
    of one NVLink domain consecutive, timed with NCCL's cost model (``fabric.gpu``); ``lnc`` does not
    apply.  ``runtime=False`` leaves out the runtime constants (costs, efficiencies, size classes): links at
    their nominal rate, the fastest algorithm, for callers that calibrate their own."""

    def __init__(self, system: str, instances: int = 1, lnc: Optional[int] = 1,
                 hardware_file: Optional[str] = None, simulate: bool = False, runtime: bool = True,
                 in_graph: bool = True):
        # a hardware file named by the environment is part of the cache keys below
        hardware_file = hardware_file or os.environ.get("TRNSIM_HARDWARE") or None
        self._memo: Dict[Tuple[str, float, Tuple[int, ...]], Tuple[str, float]] = {}
        self.system, self.instances, self.hardware_file = system, instances, hardware_file
        self.simulate, self.runtime, self.in_graph = simulate, runtime, in_graph
        self.gpu = None
        if gpu_system_key(system, hardware_file) is not None:
            # NVLink / NVSwitch domains and the network between them, timed with NCCL's cost model; a GPU
            # has no logical-core grouping, so ``lnc`` does not apply
            self.gpu = self.topology = build_gpu_topology(system, instances, hardware_file)
            self.lnc, self.launch_s = 1, 0.0
            return
        topo = _topology(system, instances, lnc, hardware_file)  # validates now, not later
        self.cfg = load_fabric_config(hardware_file)
        self.rt = self.cfg.runtime(topo.chip).call(in_graph) if runtime else None
        self.launch_s = self.rt.launch_overhead_s if runtime else 0.0
        self.step_s = self.rt.step_overhead_s if runtime else 0.0
        # runtime=False: every link at its nominal rate, the fastest algorithm, no software costs
        self.topology = topo if runtime else dataclasses.replace(topo, efficiency=1.0, efa_efficiency=1.0)
        self.lnc = topo.lnc

    @property
    def n_ranks(self) -> int:
        """Logical cores of the whole system."""
        return self.topology.n_ranks

    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds for ``op`` with buffer ``size_bytes`` (nccl-tests convention) over ``ranks``."""
        return self.choose(op, size_bytes, ranks)[1]

    def choose(self, op: str, size_bytes: float, ranks: Sequence[int]) -> Tuple[str, float]:
        """(algorithm, seconds) the runtime would pick for ``op`` of ``size_bytes`` over ``ranks``."""
        op = canonical_op(op)
        group = tuple(int(r) for r in ranks)
        key = (op, float(size_bytes), group)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if len(group) <= 1 or size_bytes <= 0:
            hit = ("none", 0.0)  # nothing to exchange
        elif self.gpu is not None:
            hit = nccl_time(self.gpu, op, float(size_bytes), group, self.runtime)[:2]
        else:
            coeffs = None if self.simulate else self._fast(op, group)
            if coeffs:
                name, t = fast.choose(coeffs, float(size_bytes), self.cfg, self.step_s, self.runtime)
            else:
                name, t = self._simulated(op, float(size_bytes), group)
            hit = (name, t + self.launch_s)
        self._memo[key] = hit
        return hit

    def _fast(self, op: str, group: Tuple[int, ...]) -> Optional[list]:
        """Closed-form candidates of a regular-grid group, or None (irregular: simulate instead); shared by
        every FabricComm of the process (the planner builds one per configuration)."""
        return fast.candidates(group_topology(self.topology, group), op, group, self.hardware_file, self.runtime,
                               self.in_graph)

    def _simulated(self, op: str, size: float, group: Tuple[int, ...]) -> Tuple[str, float]:
        """The flow simulator's choice and its seconds (no launch overhead)."""
        topo = group_topology(self.topology, group)
        rs = RankSet(topo, group)
        best, _, skipped = runtime_schedule(topo, op, size, rs, self.cfg, tuple(ALGORITHMS), self.rt,
                                            "runtime" if self.runtime else "fastest")
        if best is None:
            from ..errors import ConfigError
            raise ConfigError(f"no algorithm can run {op} over {rs.n} ranks of {self.topology.name}"
                              f" ({'; '.join(r for _, r in skipped)})", rule="fabric-algorithm",
                              limit=list(ALGORITHMS), value="runtime")
        return best[1].algorithm, best[0]


@functools.lru_cache(maxsize=256)
def _topology(system: str, instances: int, lnc: Optional[int], hardware_file: Optional[str]):
    # the catalog is cached per file path, so is the topology built from it
    return build_topology(system, instances, lnc, hardware_file)
