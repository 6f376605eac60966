"""Collective timing for the estimator: the ``CommModel`` protocol, the fabric default and an alpha-beta
placeholder.

The default is ``trnsim.fabric.FabricComm`` at the nominal link rate (closed forms per algorithm, the flow
simulator for irregular groups or with ``fabric-sim``); the model's own calibration (comm factor and
per-call overhead, data/calibration.toml) supplies the runtime constants.  The alpha-beta placeholder is
kept for comparison and reads its link figures from the same fabric topology (one source of truth).
Size convention as nccl-tests: the all-reduce buffer, the all-gather output, the reduce-scatter input,
the all-to-all total per rank.
"""
from __future__ import annotations

from typing import List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from ..errors import ConfigError
from .datafiles import figure
from .parallel import System

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast")


@runtime_checkable
class CommModel(Protocol):
    """Anything that times a collective over a set of logical NeuronCore ranks."""
    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds for collective ``op`` of ``size_bytes`` over ``ranks``."""
        ...


class AlphaBetaComm:
    """Hierarchical alpha-beta collectives: cores of a chip, chips of an instance (NeuronLink), instances (EFA).

    Each level runs a ring (or a one-step mesh below the runtime's mesh threshold) over the ranks it holds;
    bandwidth per rank is what a ring at that level gets per chip in the fabric's topology (one port each
    way round the ring on a torus or ring, the chip's port on a switch, its EFA share), shared by the
    group's ranks on a chip.
    """

    def __init__(self, system: System, hardware_file: Optional[str] = None):
        from ..fabric import build_topology, load_fabric_config
        self.system = system
        inst, chip, lnc = system.instance, system.chip, system.lnc
        a_chip, a_link, a_efa = (figure("comm", "latency.on_chip_s"), figure("comm", "latency.intra_node_s"),
                                 figure("comm", "latency.inter_node_s"))
        self.mesh_below = figure("comm", "algorithm.mesh_below_bytes")
        topo = build_topology(inst.key, max(1, system.nodes), lnc, hardware_file)
        ring = load_fabric_config(hardware_file).ring_channels
        # cores of one chip exchange through HBM via DMA
        on_chip = topo.intra_chip_bw
        node_dims = topo.dim_bw[:len(topo.dim_bw) - (1 if inst.nodes > 1 else 0)]
        link = topo.switch_bw or ring * min(node_dims or (on_chip / ring,))
        # servers of an UltraServer meet over NeuronLink (the torus Z links) or the switch
        between = ring * topo.dim_bw[-1] if inst.nodes > 1 and topo.dim_bw else link
        efa = topo.efa_bw or between
        self.cores_per_chip = chip.cores // lnc
        # (chips per group at this level, per-chip bandwidth, latency per step), innermost first
        self.tiers = ((1, on_chip, a_chip), (inst.chips_per_node, link, a_link), (inst.chips, between, a_link),
                      (None, efa, a_efa))

    def _levels(self, ranks: Sequence[int]) -> List[Tuple[int, float, float]]:
        """(group size, bandwidth per rank, latency) at each level the ranks span, innermost first."""
        chips = sorted({r // self.cores_per_chip for r in ranks})
        per_chip = max(1, len(ranks) // len(chips))
        out = []
        if per_chip > 1:   # the chip's cores share its DMA bandwidth
            out.append((per_chip, self.tiers[0][1] / self.cores_per_chip, self.tiers[0][2]))
        groups = len(chips)
        for span, bw, a in self.tiers[1:]:
            n_here = len({c // span for c in chips}) if span else 1
            g = max(1, groups // n_here)      # members per group at this level
            if g > 1:
                out.append((g, bw / per_chip, a))
            groups = n_here
        return out

    def _pass(self, size: float, ranks: Sequence[int]) -> Tuple[float, float]:
        """(latency, transfer) seconds of one reduce-scatter or all-gather pass over the levels, the buffer
        shrinking level by level."""
        lat = xfer = 0.0
        s = float(size)
        for g, bw, a in self._levels(ranks):
            lat += (1 if s < self.mesh_below else g - 1) * a
            xfer += (g - 1) / g * s / bw
            s /= g
        return lat, xfer

    def time_parts(self, op: str, size_bytes: float, ranks: Sequence[int]) -> Tuple[float, float]:
        """(latency, transfer) seconds of ``op``: the fixed per-step part and the bandwidth part."""
        if op not in COLLECTIVES:
            raise ConfigError(f"unknown collective {op!r}", rule="collective", limit=COLLECTIVES, value=op)
        ranks = list(ranks)
        if len(ranks) <= 1 or size_bytes <= 0:
            return 0.0, 0.0
        if op == "all-reduce":
            lat, xfer = self._pass(size_bytes, ranks)
            return 2.0 * lat, 2.0 * xfer
        if op in ("all-gather", "reduce-scatter", "broadcast"):
            return self._pass(size_bytes, ranks)
        levels = self._levels(ranks)
        if op == "send-recv":
            g, bw, a = levels[-1]
            return a, size_bytes / bw
        # all-to-all: each rank sends 1/n of its buffer to every rank; a level's links carry the share
        # addressed outside the group below it (1 - inner/n); the slowest level sets the time
        n, inner, worst = len(ranks), 1, (0.0, 0.0)
        for g, bw, a in levels:
            cand = (a, size_bytes * (1.0 - inner / n) / bw)
            inner *= g
            if sum(cand) > sum(worst):
                worst = cand
        return worst

    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds for ``op`` of ``size_bytes`` over ``ranks`` (logical NeuronCore ids)."""
        return sum(self.time_parts(op, size_bytes, ranks))


COMM_MODELS = ("fabric", "fabric-sim", "alpha-beta")
DEFAULT_COMM = "fabric"   # the model the calibration in data/calibration.toml was fitted with


def default_comm(system: System, hardware_file: Optional[str] = None, which: str = DEFAULT_COMM) -> CommModel:
    """The collectives model by name: the fabric's closed forms (default, the one the calibration was fitted
    with), the fabric's flow simulator (``fabric-sim``, slower) or the alpha-beta placeholder.  Both fabric
    models run links at their nominal rate: the calibration's comm factor and overhead come on top."""
    if which not in COMM_MODELS:
        raise ConfigError(f"unknown collectives model {which!r}", rule="comm-model", limit=COMM_MODELS,
                          value=which)
    if which == "alpha-beta":
        return AlphaBetaComm(system, hardware_file)
    from ..fabric import FabricComm
    return FabricComm(system.instance.key, instances=system.nodes, lnc=system.lnc, hardware_file=hardware_file,
                      simulate=which == "fabric-sim", runtime=False)
