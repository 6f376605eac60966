"""Collective algorithms: each turns (op, size, ranks) into a Schedule of chip-to-chip flows.

Flat algorithms (ring, dual-ring, rdh, direct, pairwise) run over one ordered list of ranks; dimensional ones
(torus-rings, hierarchical, hierarchical-rdh) run phase by phase along the topology's axes."""
from .base import OPS, NotApplicable, WrongOp
from .dualring import dual_ring
from .dims import hierarchical, hierarchical_rdh, torus_rings
from .flat import direct, pairwise, rdh, ring

# name -> builder(op, size, rankset, topology, config) -> Schedule (raises NotApplicable)
ALGORITHMS = {
    "ring": ring,
    "dual-ring": dual_ring,
    "rdh": rdh,
    "direct": direct,
    "pairwise": pairwise,
    "torus-rings": torus_rings,
    "hierarchical": hierarchical,
    "hierarchical-rdh": hierarchical_rdh,
}

__all__ = ["ALGORITHMS", "NotApplicable", "OPS", "WrongOp"]
