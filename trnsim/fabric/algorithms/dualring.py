"""Dual ring: two edge-disjoint Hamiltonian cycles of a 2D torus, each carrying half the data both ways.

The 16-chip torus has two non-overlapping Hamiltonian cycles [CCA]; rings along both use all four ports
of every chip at once, where a single ring uses two.  The cycles are found by a small search."""
from __future__ import annotations

from functools import lru_cache
from typing import List, Optional, Tuple

import numpy as np

from ..config import FabricConfig
from ..schedule import RankSet, Schedule, chip_step
from ..topology import Topology
from .base import NotApplicable, WrongOp

_BUDGET = 200_000  # search nodes before giving up on a decomposition (a 4x4 torus needs a few hundred)


def _neighbours(kx: int, ky: int, c: int) -> List[int]:
    x, y = c % kx, c // kx
    return [((x + 1) % kx) + kx * y, ((x - 1) % kx) + kx * y, x + kx * ((y + 1) % ky), x + kx * ((y - 1) % ky)]


def _edge(a: int, b: int) -> Tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _single_cycle(n: int, edges, start: int = 0) -> Optional[Tuple[int, ...]]:
    """The node order of ``edges`` when they form one cycle through all n nodes, else None."""
    adj = {i: [] for i in range(n)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    if any(len(v) != 2 for v in adj.values()):
        return None
    order, prev, cur = [start], None, start
    while True:
        nxt = adj[cur][0] if adj[cur][0] != prev else adj[cur][1]
        if nxt == start:
            break
        order.append(nxt)
        prev, cur = cur, nxt
    return tuple(order) if len(order) == n else None


@lru_cache(maxsize=16)
def decomposition(kx: int, ky: int) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """Two edge-disjoint Hamiltonian cycles (chip orders) of a kx x ky torus, or None if none is found."""
    if kx < 3 or ky < 3:
        return None  # a dimension of 2 doubles its links; no simple decomposition
    n = kx * ky
    all_edges = {_edge(c, d) for c in range(n) for d in _neighbours(kx, ky, c)}
    path, seen, budget = [0], {0}, [_BUDGET]

    def dfs() -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
        budget[0] -= 1
        if budget[0] < 0:
            return None
        cur = path[-1]
        if len(path) == n:
            if 0 not in _neighbours(kx, ky, cur):
                return None
            used = {_edge(a, b) for a, b in zip(path, path[1:] + [0])}
            other = _single_cycle(n, all_edges - used)
            return (tuple(path), other) if other else None
        for nxt in _neighbours(kx, ky, cur):
            if nxt not in seen:
                path.append(nxt)
                seen.add(nxt)
                found = dfs()
                if found:
                    return found
                seen.discard(path.pop())
        return None

    return dfs()


def dual_ring(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """Ring all-reduce / all-gather / reduce-scatter split over two disjoint Hamiltonian cycles of the torus."""
    if op not in ("all-reduce", "all-gather", "reduce-scatter"):
        raise WrongOp(f"dual-ring does not run {op}")
    if topo.topology != "torus2d":
        raise NotApplicable("dual-ring needs a 2D torus")
    x, y, inst = 1, 2, len(rs.sizes) - 1
    if not rs.is_grid or rs.values[inst].size != 1 or rs.values[x].size != topo.dims[0] \
            or rs.values[y].size != topo.dims[1]:
        raise NotApplicable("dual-ring needs every chip of one torus, the same cores on each")
    cycles = decomposition(*topo.dims)
    if cycles is None:
        raise NotApplicable(f"no two disjoint Hamiltonian cycles found on a {topo.dims} torus")
    cores = rs.values[0]
    base = int(rs.values[inst][0]) * topo.chips_per_unit
    n = rs.n
    steps_src, steps_dst = [], []
    for cyc in cycles:
        order = np.array([(base + c) * topo.cores_per_chip + k for c in cyc for k in cores], dtype=np.int64)
        steps_src += [order, order]
        steps_dst += [np.roll(order, -1), np.roll(order, 1)]
    repeat = 2 * (n - 1) if op == "all-reduce" else n - 1
    # four channels (two cycles, both directions), each with a quarter of every chunk
    step = chip_step(topo, np.concatenate(steps_src), np.concatenate(steps_dst), size / n / 4, repeat, op)
    return Schedule(op, "dual-ring", (step,))


def dual_orders(topo: Topology, ranks: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """The ranks of one whole torus instance ordered along each of the two disjoint cycles (None if
    the topology or the ranks do not allow it): what a hierarchical schedule uses inside an instance."""
    if topo.topology != "torus2d":
        return None
    chips = ranks // topo.cores_per_chip
    local = chips % topo.chips_per_unit
    if np.unique(chips // topo.chips_per_unit).size != 1 or np.unique(local).size != topo.chips_per_unit:
        return None
    cycles = decomposition(*topo.dims)
    if cycles is None:
        return None
    out = []
    for cyc in cycles:
        pos = np.empty(topo.chips_per_unit, dtype=np.int64)
        pos[list(cyc)] = np.arange(len(cyc))
        out.append(ranks[np.lexsort((ranks, pos[local]))])
    return out[0], out[1]
