"""A collective as data: a schedule of steps, each a set of chip-to-chip flows, plus the rank set it runs on."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError
from .topology import Topology


@dataclass(frozen=True)
class Step:
    """Flows that run together: ``src``/``dst`` chip ids and ``nbytes`` each; the step repeats ``repeat`` times."""
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    repeat: int = 1
    label: str = ""
    fanout: int = 1  # messages each sending rank issues in the step (its peers), for the runtime's step cost

    @property
    def flows(self) -> int:
        """Number of chip-to-chip flows."""
        return int(self.src.size)


@dataclass(frozen=True)
class Schedule:
    """An algorithm's steps in order; ``folded`` says what was simulated by a representative, if anything."""
    op: str
    algorithm: str
    steps: Tuple[Step, ...]
    hierarchical: bool = False
    folded: str = ""


def chip_step(topo: Topology, src_ranks: np.ndarray, dst_ranks: np.ndarray, nbytes, repeat: int = 1,
              label: str = "") -> Step:
    """Rank-to-rank transfers summed per (source chip, destination chip): the flows of one step."""
    cpc = topo.cores_per_chip
    s = np.asarray(src_ranks, dtype=np.int64) // cpc
    d = np.asarray(dst_ranks, dtype=np.int64) // cpc
    b = np.broadcast_to(np.asarray(nbytes, dtype=float), s.shape)
    key = s * topo.n_chips + d
    uk, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv.ravel(), weights=b.ravel(), minlength=uk.size)
    keep = tot > 0
    return Step(src=uk[keep] // topo.n_chips, dst=uk[keep] % topo.n_chips, nbytes=tot[keep],
                repeat=int(repeat), label=label)


class RankSet:
    """The ranks (logical NeuronCores) a collective runs on, with their coordinates along the topology's axes.

    ``ranks=None`` means every core of the system and is never materialized (a million chips)."""

    def __init__(self, topo: Topology, ranks: Optional[Sequence[int]] = None):
        self.topo = topo
        self.sizes = tuple(a.size for a in topo.axes)
        if ranks is None:
            self.ranks = None
            self.values = [np.arange(s) for s in self.sizes]
            self.n = topo.n_ranks
            self.is_grid = True
            return
        r = np.asarray(list(ranks), dtype=np.int64)
        if r.ndim != 1 or r.size == 0:
            raise ConfigError("ranks must be a non-empty list of core indices", rule="fabric-ranks",
                              limit=f"0..{topo.n_ranks - 1}", value=list(ranks))
        bad = r[(r < 0) | (r >= topo.n_ranks)]
        if bad.size:
            raise ConfigError(f"rank {int(bad[0])} does not exist on {topo.name} x {topo.units} "
                              f"({topo.n_ranks} cores at LNC={topo.lnc})", rule="fabric-ranks",
                              limit=f"0..{topo.n_ranks - 1}", value=int(bad[0]))
        u, counts = np.unique(r, return_counts=True)
        if u.size != r.size:
            raise ConfigError("ranks repeat a core", rule="fabric-ranks", limit="distinct cores",
                              value=int(u[counts > 1][0]))
        self.ranks = r
        self.n = int(r.size)
        c = self.coords(r)
        self.values = [np.unique(c[:, a]) for a in range(len(self.sizes))]
        self.is_grid = int(np.prod([v.size for v in self.values])) == self.n

    def coords(self, ranks: np.ndarray) -> np.ndarray:
        """(N, axes) coordinates of ranks, innermost axis first."""
        out = np.empty((ranks.size, len(self.sizes)), dtype=np.int64)
        rest = ranks.copy()
        for a, s in enumerate(self.sizes):
            rest, out[:, a] = np.divmod(rest, s)
        return out

    def rank_of(self, coords: np.ndarray) -> np.ndarray:
        """Inverse of ``coords``."""
        r = np.zeros(coords.shape[0], dtype=np.int64)
        m = 1
        for a, s in enumerate(self.sizes):
            r += coords[:, a] * m
            m *= s
        return r

    def all_ranks(self) -> np.ndarray:
        """Every rank of the set, materialized."""
        if self.ranks is not None:
            return self.ranks
        return np.arange(self.n, dtype=np.int64)

    def chips(self) -> int:
        """How many distinct chips the set touches."""
        if self.ranks is None:
            return self.topo.n_chips
        return int(np.unique(self.ranks // self.topo.cores_per_chip).size)

    def grid(self, restrict: Optional[Dict[int, np.ndarray]] = None) -> np.ndarray:
        """Coordinates of the grid's ranks (optionally only some values along some axes)."""
        vals = [restrict[a] if restrict and a in restrict else v for a, v in enumerate(self.values)]
        mesh = np.meshgrid(*vals, indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1).astype(np.int64)

    def used_axes(self) -> Tuple[int, ...]:
        """Axes along which the set spans more than one value."""
        return tuple(a for a, v in enumerate(self.values) if v.size > 1)


def snake_key(coords: np.ndarray, sizes: Sequence[int], axes: Sequence[int]) -> np.ndarray:
    """Position in a reflected (boustrophedon) order over ``axes``: consecutive ranks are torus neighbours."""
    key = np.zeros(coords.shape[0], dtype=np.int64)
    rev = np.zeros(coords.shape[0], dtype=bool)
    for a in reversed(list(axes)):
        c = coords[:, a]
        v = np.where(rev, sizes[a] - 1 - c, c)
        key = key * sizes[a] + v
        rev = (v % 2) == 1
    return key


def ring_order(rs: RankSet, ranks: np.ndarray) -> np.ndarray:
    """``ranks`` sorted along the snake over every axis (the ring a runtime would build)."""
    c = rs.coords(ranks)
    return ranks[np.argsort(snake_key(c, rs.sizes, range(len(rs.sizes))), kind="stable")]
