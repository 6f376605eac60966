"""The Neuron collective runtime's choices, applied to the fabric's algorithms: which algorithm class it runs
for a message size (mesh, recursive halving-doubling, pipelined rings), the link-rate fraction each class
reaches, the software cost of every step a rank takes, and the core-to-core capacity a group gets."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional, Sequence, Tuple

import numpy as np

from .config import FabricConfig, Runtime
from .topology import Topology

# algorithm -> the runtime's classes: Mesh (direct writes), RDH, KangaRing-style pipelined rings [CCA].  Across
# instances the runtime goes hierarchical (intra-node, then EFA); its EFA level may be a ring or RDH, so
# hierarchical-rdh also serves the ring class, where it runs at the rings' rate (a ring over thousands of
# instances would take thousands of EFA steps).
CLASSES_OF = {"ring": ("ring",), "dual-ring": ("ring",), "torus-rings": ("ring",), "hierarchical": ("ring",),
              "rdh": ("rdh",), "hierarchical-rdh": ("rdh", "ring"), "direct": ("mesh",), "pairwise": ("mesh",)}
CLASS_OF = {k: v[0] for k, v in CLASSES_OF.items()}
_FALLBACK = {"mesh": ("mesh", "rdh", "ring"), "rdh": ("rdh", "ring", "mesh"), "ring": ("ring", "rdh", "mesh")}


def size_class(size: float, cfg: FabricConfig) -> str:
    """The class the runtime runs a message of ``size`` bytes with: Mesh below mesh_max_bytes, RDH up to
    rdh_max_bytes, rings above [CCA]."""
    return "mesh" if size < cfg.mesh_max_bytes else "rdh" if size <= cfg.rdh_max_bytes else "ring"


def padded_sizes(size: float, cfg: FabricConfig) -> Tuple[float, ...]:
    """The first size of every later class: a message can always be run padded to a larger one, so the
    runtime's time is taken as the least over the size and these (time never falls as the size grows, also
    where a class boundary would make a just-smaller message the slower one)."""
    starts = (cfg.mesh_max_bytes, math.nextafter(cfg.rdh_max_bytes, math.inf))
    return tuple(b for b in starts if b > size)


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


def chosen_classes(size: float, cfg: FabricConfig, mode: str, available) -> Tuple[str, ...]:
    """The classes whose candidates compete: the first of the size's class order that has any ('runtime'),
    or all ('fastest')."""
    if mode == "runtime":
        for cls in class_order(size, cfg):
            if cls in available:
                return (cls,)
    return tuple(sorted(set(available)))


def pick(times: Sequence[Tuple[str, str, float]], size: float, cfg: FabricConfig,
         mode: str) -> Optional[Tuple[str, float]]:
    """The runtime's (algorithm, seconds) among (algorithm, class, seconds) candidates: 'runtime' takes the
    fastest of the size's class (falling back class by class), 'fastest' the fastest of all."""
    if not times:
        return None
    keep = chosen_classes(size, cfg, mode, {c for _, c, _ in times})
    name, _, t = min((x for x in times if x[1] in keep), key=lambda x: x[2])
    return name, t
