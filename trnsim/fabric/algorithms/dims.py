"""Dimensional algorithms: a collective done phase by phase along the topology's axes.

torus-rings: one ring phase per axis (cores of a chip, x, y, z, instances), as torus collectives do.
hierarchical: NeuronLink inside an instance (both disjoint Hamiltonian cycles when the instance is a
whole 2D torus), EFA between: all-reduce = intra reduce-scatter + inter
all-reduce + intra all-gather, all-gather = inter then intra, reduce-scatter = intra then inter [CCE].

Groups of one phase run side by side.  Groups in other instances use disjoint links, so an intra-instance
phase is simulated on one representative instance; an EFA phase over m instances is simulated on
min(m, simulator.fold_instances) of them (exact on a non-blocking EFA network: every NIC carries the same
load whatever m is), its step count taken from the full m."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ..config import FabricConfig
from ..schedule import RankSet, Schedule, Step, chip_step, snake_key
from ..topology import Topology
from .base import NotApplicable, WrongOp, is_pow2, log2
from .dualring import dual_orders

_REDUCING = ("all-reduce", "all-gather", "reduce-scatter")


class _Phase:
    """Ranks of one phase as a (groups, members) array, members in ring order, possibly folded."""

    def __init__(self, rs: RankSet, topo: Topology, cfg: FabricConfig, axes: Tuple[int, ...]):
        efa = len(rs.sizes) - 1
        m = rs.values[efa].size
        restrict = {}
        self.note = ""
        if efa not in axes and m > 1:
            restrict[efa] = rs.values[efa][:1]
            self.note = f"{'+'.join(topo.axes[a].name for a in axes)} phase on 1 representative instance of {m}"
        elif axes == (efa,) and m > cfg.fold_instances:
            restrict[efa] = rs.values[efa][:cfg.fold_instances]
            self.note = f"EFA phase on {cfg.fold_instances} representative instances of {m}"
        self.k = int(np.prod([rs.values[a].size for a in axes]))  # full group size
        coords = rs.grid(restrict)
        other = coords.copy()
        other[:, list(axes)] = 0
        order = np.lexsort((snake_key(coords, rs.sizes, axes), rs.rank_of(other)))
        self.kr = int(np.prod([(restrict.get(a, rs.values[a])).size for a in axes]))
        self.ranks = rs.rank_of(coords[order]).reshape(-1, self.kr)
        self.folded = bool(restrict) and efa in axes


def _ring_phase(ph: _Phase, topo: Topology, cfg: FabricConfig, chunk: float, label: str) -> List[Step]:
    # every group's ring in one step, repeated k-1 times (k = the full group size, folded or not)
    dual = dual_orders(topo, ph.ranks[0]) if ph.ranks.shape[0] == 1 else None
    if dual is not None:  # one whole torus instance: both disjoint cycles, both directions
        src = np.concatenate([dual[0], dual[0], dual[1], dual[1]])
        dst = np.concatenate([np.roll(dual[0], -1), np.roll(dual[0], 1), np.roll(dual[1], -1), np.roll(dual[1], 1)])
        return [chip_step(topo, src, dst, chunk / 4, ph.k - 1, label + " (dual ring)")]
    ch = 2 if cfg.ring_channels >= 2 else 1
    src = np.concatenate([ph.ranks.ravel()] * ch)
    dst = np.concatenate([np.roll(ph.ranks, -1, axis=1).ravel(), np.roll(ph.ranks, 1, axis=1).ravel()][:ch])
    return [chip_step(topo, src, dst, chunk / ch, ph.k - 1, label)]


def _rdh_phase(ph: _Phase, topo: Topology, chunks: Sequence[float], dists: Sequence[int], label: str) -> List[Step]:
    idx = np.arange(ph.kr)
    steps = []
    for j, (b, d) in enumerate(zip(chunks, dists)):
        partner = idx ^ (1 if ph.folded else d)  # a folded phase: any other instance carries the same load
        steps.append(chip_step(topo, ph.ranks.ravel(), ph.ranks[:, partner].ravel(), b, 1, f"{label} {j}"))
    return steps


def _schedule(name: str, op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig,
              phases: List[Tuple[int, ...]], efa_inner: str) -> Schedule:
    if op not in _REDUCING:
        raise WrongOp(f"{name} runs all-reduce, all-gather and reduce-scatter, not {op}")
    if not rs.is_grid:
        raise NotApplicable(f"{name}: the ranks do not form a regular grid over the topology's axes")
    if len(phases) < 2:
        raise NotApplicable(f"{name}: the ranks span fewer than two levels")
    efa = len(rs.sizes) - 1
    built = [_Phase(rs, topo, cfg, ax) for ax in phases]
    uses_rdh = [efa_inner == "rdh" and ax == (efa,) for ax in phases]
    for ph, r in zip(built, uses_rdh):
        if r and not is_pow2(ph.k):
            raise NotApplicable(f"{name}: {ph.k} instances is not a power of two")

    def rs_phase(ph, rdh, d):
        if rdh:
            L = log2(ph.k)
            return _rdh_phase(ph, topo, [d / 2 ** (j + 1) for j in range(L)],
                              [ph.k >> (j + 1) for j in range(L)], "halving")
        return _ring_phase(ph, topo, cfg, d / ph.k, "reduce-scatter")

    def ag_phase(ph, rdh, d):
        if rdh:
            L = log2(ph.k)
            return _rdh_phase(ph, topo, [d * 2 ** j for j in range(L)], [1 << j for j in range(L)], "doubling")
        return _ring_phase(ph, topo, cfg, d, "all-gather")

    steps: List[Step] = []
    if op in ("all-reduce", "reduce-scatter"):
        d = size
        for ph, r in zip(built, uses_rdh):
            steps += rs_phase(ph, r, d)
            d /= ph.k
        if op == "all-reduce":
            for ph, r in reversed(list(zip(built, uses_rdh))):
                steps += ag_phase(ph, r, d)
                d *= ph.k
    else:
        d = size / rs.n
        for ph, r in reversed(list(zip(built, uses_rdh))):
            steps += ag_phase(ph, r, d)
            d *= ph.k
    notes = sorted({ph.note for ph in built if ph.note})
    return Schedule(op, name, tuple(steps), hierarchical=True, folded="; ".join(notes))


def torus_rings(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """One ring phase per axis the ranks span (cores, torus dims / switch levels, instances)."""
    return _schedule("torus-rings", op, size, rs, topo, cfg, [(a,) for a in rs.used_axes()], "ring")


def _hier_phases(rs: RankSet, name: str) -> List[Tuple[int, ...]]:
    efa = len(rs.sizes) - 1
    used = rs.used_axes()
    inside = tuple(a for a in used if a != efa)
    if efa not in used:
        raise NotApplicable(f"{name}: the ranks live in one instance (no EFA level)")
    return ([inside] if inside else []) + [(efa,)]


def hierarchical(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """A ring inside each instance (NeuronLink) and a ring across instances (EFA)."""
    return _schedule("hierarchical", op, size, rs, topo, cfg, _hier_phases(rs, "hierarchical"), "ring")


def hierarchical_rdh(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """A ring inside each instance, recursive halving/doubling across instances (log2 m EFA steps)."""
    return _schedule("hierarchical-rdh", op, size, rs, topo, cfg, _hier_phases(rs, "hierarchical-rdh"), "rdh")
