"""The Neuron collective runtime's choices, applied to the fabric's algorithms: which algorithm class it runs
for a message size (mesh, recursive halving-doubling, pipelined rings), the link-rate fraction each class
reaches, the software cost of every step a rank takes, and the core-to-core capacity a group gets."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence, Tuple

import numpy as np

from .config import FabricConfig, Runtime
from .topology import Topology

# algorithm -> the runtime's class: Mesh (direct writes), RDH, KangaRing-style pipelined rings [CCA]
CLASS_OF = {"ring": "ring", "dual-ring": "ring", "torus-rings": "ring", "hierarchical": "ring",
            "rdh": "rdh", "hierarchical-rdh": "rdh", "direct": "mesh", "pairwise": "mesh"}
_FALLBACK = {"mesh": ("mesh", "rdh", "ring"), "rdh": ("rdh", "ring", "mesh"), "ring": ("ring", "rdh", "mesh")}


def size_class(size: float, cfg: FabricConfig) -> str:
    """The class the runtime runs a message of ``size`` bytes with: Mesh below mesh_max_bytes, RDH up to
    rdh_max_bytes, rings above [CCA]."""
    return "mesh" if size < cfg.mesh_max_bytes else "rdh" if size <= cfg.rdh_max_bytes else "ring"


def class_order(size: float, cfg: FabricConfig) -> Tuple[str, ...]:
    """Classes to try in order: the size's own, then the others when none of its algorithms can run."""
    return _FALLBACK[size_class(size, cfg)]


def class_topology(topo: Topology, cls: str, rt: Optional[Runtime], op: str = "all-reduce") -> Topology:
    """``topo`` with NeuronLink links at the fraction of rate the class reaches running ``op``."""
    eff = rt.class_efficiency(cls, op) if rt is not None else 1.0
    return topo if eff == topo.efficiency else replace(topo, efficiency=eff)


def messages(schedule) -> float:
    """Messages one rank issues over the whole schedule: each step's fan-out times its repeats."""
    return float(sum(s.repeat * s.fanout for s in schedule.steps))


def group_topology(topo: Topology, ranks: Optional[Sequence[int]]) -> Topology:
    """``topo`` with the core-to-core capacity the group's ranks sharing a chip drive (see Topology.for_group)."""
    if ranks is None:
        return topo.for_group(topo.cores_per_chip)
    chips = np.asarray(ranks, dtype=np.int64) // topo.cores_per_chip
    return topo.for_group(int(np.bincount(chips - chips.min()).max()))


def pick(times: Sequence[Tuple[str, float]], size: float, cfg: FabricConfig, mode: str) -> Optional[Tuple[str, float]]:
    """The runtime's (algorithm, seconds) among candidates: ``mode`` 'runtime' takes the fastest of the size's
    class (falling back class by class), 'fastest' the fastest of all."""
    if not times:
        return None
    if mode == "runtime":
        for cls in class_order(size, cfg):
            inside = [t for t in times if CLASS_OF.get(t[0]) == cls]
            if inside:
                return min(inside, key=lambda x: x[1])
    return min(times, key=lambda x: x[1])
