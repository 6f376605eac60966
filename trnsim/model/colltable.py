"""The size x group table of an estimate: each distinct collective (op, bytes per call, group) a step charged,
how many calls, what one call costs, the algorithm the runtime picks and the links it crosses.

An estimate only records ``{(op, size, ranks): calls}`` while it runs (``Context.record``); the rows are made
once, when the result is built, from the times the estimate itself charged (memoised, so no collective is
timed twice)."""
from __future__ import annotations

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


__all__ = ["CollectiveGroup", "add_group", "collective_groups", "scaled"]
