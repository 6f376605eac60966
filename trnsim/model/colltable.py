"""The size x group table of an estimate: each distinct collective (op, bytes per call, group) a step charged,
how many calls, what one call costs, the algorithm the runtime picks and the links it crosses.

An estimate only records ``{(op, size, ranks): calls}`` while it runs (``Context.charge``); the rows are made
on first use (a planner that never reads them never pays for them), from the times the estimate itself
charged (memoised, so no collective is timed twice)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

Groups = Mapping[Tuple[str, float, Tuple[int, ...]], float]


@dataclass(frozen=True)
class CollectiveGroup:
    """One row: ``calls`` collectives ``op`` of ``bytes`` each over ``ranks`` ranks."""
    op: str
    bytes: float            # buffer bytes of one call (nccl-tests convention)
    ranks: int              # ranks in the group
    calls: float            # calls per step (per prefill / decode step for inference)
    us_per_call: float      # microseconds of one call, as the estimate charged it
    total_ms: float         # calls x time per call
    algorithm: str          # what the runtime (Neuron or NCCL) picks; "" for a collectives model without one
    links: Tuple[str, ...]  # intra-chip, NeuronLink / NeuronSwitch, EFA; NVLink, InfiniBand / EFA

    def to_dict(self) -> dict:
        """JSON-ready dict (links as a list)."""
        return dict(op=self.op, bytes=self.bytes, ranks=self.ranks, calls=self.calls, us_per_call=self.us_per_call,
                    total_ms=self.total_ms, algorithm=self.algorithm, links=list(self.links))


def add_group(groups: dict, op: str, size: float, ranks, calls: float) -> None:
    """Add ``calls`` collectives ``op`` of ``size`` bytes over ``ranks`` to a ``{(op, size, ranks): calls}``
    record (nothing for a group of one rank or an empty buffer: they cost nothing and are not issued)."""
    if calls <= 0 or size <= 0 or len(ranks) <= 1:
        return
    key = (op, float(size), tuple(ranks))
    groups[key] = groups.get(key, 0) + calls


def scaled(groups: Groups, times: float) -> dict:
    """A record with every call count multiplied by ``times``."""
    return {k: v * times for k, v in groups.items()}


def _fabric(comm):
    """The fabric behind a collectives model (itself, or the one it wraps), or None."""
    from ..fabric import FabricComm
    for c in (comm, getattr(comm, "fabric", None)):
        if isinstance(c, FabricComm):
            return c
    return None


def collective_groups(ctx, groups: Optional[Groups]) -> Tuple[CollectiveGroup, ...]:
    """The rows of a record, in the order first charged; times per call from ``ctx`` (the estimate's own
    collectives model), algorithm and links from the fabric it uses."""
    if not groups:
        return ()
    from ..fabric import links_used
    fab = _fabric(ctx.comm)
    rows = []
    for (op, size, ranks), calls in groups.items():
        t = ctx.comm_s(op, size, ranks)
        algo, links = "", ()
        if fab is not None:
            algo, links = fab.choose(op, size, ranks)[0], links_used(fab, ranks)
        n = int(calls) if float(calls).is_integer() else calls
        rows.append(CollectiveGroup(op=op, bytes=size, ranks=len(ranks), calls=n, us_per_call=t * 1e6,
                                    total_ms=t * calls * 1e3, algorithm=algo, links=tuple(links)))
    return tuple(rows)


class CollectiveTable(Sequence):
    """The size x group table of one step: a read-only sequence of ``CollectiveGroup`` rows, made from the
    record the first time it is read (then the estimate's context is let go)."""
    __slots__ = ("_ctx", "_groups", "_rows")

    def __init__(self, ctx, groups: Optional[Groups]):
        self._ctx, self._groups = ctx, dict(groups or {})
        self._rows: Optional[Tuple[CollectiveGroup, ...]] = None if self._groups else ()

    @property
    def rows(self) -> Tuple[CollectiveGroup, ...]:
        """The rows, in the order first charged."""
        if self._rows is None:
            self._rows = collective_groups(self._ctx, self._groups)
            self._ctx = None
        return self._rows

    def __getitem__(self, i):
        return self.rows[i]

    def __len__(self) -> int:
        return len(self._groups) if self._rows is None else len(self._rows)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"CollectiveTable({list(self.rows)!r})"

    def __reduce__(self):
        return (tuple, (self.rows,))   # pickled as its rows, without the context

    def to_list(self) -> list:
        """JSON-ready list of the rows' dicts."""
        return [r.to_dict() for r in self.rows]


__all__ = ["CollectiveGroup", "CollectiveTable", "add_group", "collective_groups", "scaled"]
