"""The "size x group" table of an estimate: every collective the model charged, what one call costs, the
algorithm the runtime (Neuron or NCCL) picks and the links it crosses."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, List, Sequence, Tuple

from .collectives import canonical_op
from .comm import FabricComm
from .gpu import group_shape


@dataclass(frozen=True)
class CollectiveRow:
    """One (op, size, group) an estimate charged: calls, seconds per call and in all, algorithm, links."""
    op: str
    size_bytes: float
    ranks: int
    calls: int
    time_per_call_s: float
    total_s: float
    algorithm: str
    links: Tuple[str, ...]

    def to_dict(self) -> dict:
        """Plain JSON-able dict (links as a list)."""
        d = asdict(self)
        d["links"] = list(self.links)
        return d


def links_used(comm: FabricComm, ranks: Sequence[int]) -> Tuple[str, ...]:
    """The kinds of link a group's collective crosses: intra-chip, NeuronLink or NeuronSwitch, EFA (Trainium);
    NVLink and the network between NVLink domains (GPU systems)."""
    group = [int(r) for r in ranks]
    if len(group) <= 1:
        return ()
    if comm.gpu is not None:
        _, domains, per_domain = group_shape(comm.gpu, group)
        if domains == 1:
            return ("NVLink",)
        return (("NVLink",) if per_domain > 1 else ()) + (comm.gpu.network,)
    topo = comm.topology
    chips = [r // topo.cores_per_chip for r in group]
    units = {c // topo.chips_per_unit for c in chips}
    out = []
    if len(set(chips)) < len(chips):
        out.append("intra-chip")
    if len({c for c in chips}) > len(units):
        out.append("NeuronSwitch" if topo.topology == "switch" else "NeuronLink")
    if len(units) > 1:
        out.append("EFA")
    return tuple(out)


def collective_table(comm: FabricComm, charges: Iterable[Tuple[str, float, Sequence[int], int]]
                     ) -> List[CollectiveRow]:
    """Rows of (op, size bytes, ranks, calls) charged by a model on ``comm``'s system: the same (op, size,
    group) merged with its calls summed, in the order first charged; time per call from ``comm``."""
    merged: dict = {}
    for op, size, ranks, calls in charges:
        key = (canonical_op(op), float(size), tuple(int(r) for r in ranks))
        merged[key] = merged.get(key, 0) + int(calls)
    rows = []
    for (op, size, group), calls in merged.items():
        algo, t = comm.choose(op, size, group)
        rows.append(CollectiveRow(op=op, size_bytes=size, ranks=len(group), calls=calls, time_per_call_s=t,
                                  total_s=t * calls, algorithm=algo, links=links_used(comm, group)))
    return rows
