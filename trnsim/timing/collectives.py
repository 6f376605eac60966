"""Cost rule of in-kernel collectives (cost class "collective"): the ring closed form on the link figures.

Why a closed form here and not the fabric's flow simulator: ``fabric/`` sits above ``timing/``, and a
trace must stay re-timeable by ``timing.estimate(traces, target)`` alone (both schedulers, the C one
included, read a per-instruction DmaCost).  So this rule reads the *same figures* the fabric reads
(chips.toml: DMA bandwidth, NeuronLink bandwidth and ports; fabric.toml: per-step latency, the rings'
achieved link fraction, the cores' DMA rates, the link direction convention) and the same formulas
(``hardware.collective_forms``: the ring, and the core-to-core capacity of ranks sharing a chip) for one
ring:

  all_reduce            2(n-1) steps of S/n          (S = source bytes)
  all_gather            (n-1) steps of S/n           (S = gathered destination bytes)
  reduce_scatter        (n-1) steps of S/n           (S = source bytes)
  all_to_all            (n-1) pairwise steps of S/n  (S = source bytes)
  collective_permute*   1 step of S                  (S = bytes sent or received)

each step costing ``step_s + chunk / B``.  ``B``, the rate one rank's transfer gets: ranks of one chip
share the chip's core-to-core path (each rank's DMA rate, bounded by the core-pair paths between them, at
the runtime's default LNC); ranks on several chips each drive one NeuronLink port per direction at the
rings' achieved fraction, shared by the ranks of the group on one chip.  A group of one rank is a local
DMA copy.  Not modelled: contention with other traffic, routes through intermediate chips, the skew
between ranks reaching the collective (each rank's instruction starts when its own inputs are ready).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import HardwareFileError
from ..hardware import load_catalog
from ..hardware.collective_forms import core_to_core_bw, ring_collective_s
from ..hardware.loader import unwrap


@dataclass(frozen=True)
class CollectiveFigures:
    """The figures one chip's in-kernel collectives are timed with (bytes/s, seconds)."""
    chip: str
    dma_bytes_per_s: float        # the chip's DMA bandwidth: a single rank's local copy
    core_bytes_per_s: float       # one rank's DMA rate to the other cores of its chip (fabric.toml runtime)
    core_pair_bytes_per_s: float  # the path between two cores of one chip (fabric.toml runtime)
    port_bytes_per_s: float       # one NeuronLink port, one direction
    efficiency: float             # achieved fraction of the NeuronLink rate by rings (fabric.toml runtime)
    step_s: float                 # latency of one ring step (fabric.toml latency.step_s)
    issue_overhead_s: float
    channels: int


def _figure(t: dict, path: str, file: str):
    cur = t
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise HardwareFileError(f"{file}: missing {path}", rule="hardware-file-missing",
                                    value=path)
        cur = cur[part]
    return cur


@functools.lru_cache(maxsize=32)
def figures(chip_key: str, hardware_file: Optional[str] = None) -> CollectiveFigures:
    """The in-kernel collective figures of chip ``chip_key`` (catalog merged with ``hardware_file``)."""
    cat = load_catalog(hardware_file)
    chip = cat.chips[chip_key]
    fab = unwrap(cat.extra.get("fabric", {}), "", {}, "fabric.toml")
    own = unwrap(cat.extra.get("in_kernel_collectives", {}), "", {}, "in_kernel_collectives.toml")
    both = bool(_figure(fab, "links.figure_counts_both_directions", "fabric.toml"))
    ports = max(1, int(chip.neuronlink_ports or 1))
    port = chip.chip_link_bandwidth_bytes_per_s / ports / (2.0 if both else 1.0)
    rt = _figure(fab, "runtime", "fabric.toml").get(chip_key)
    if rt is None:
        raise HardwareFileError(f"fabric.toml has no [runtime.{chip_key}] section", rule="hardware-file-missing",
                                limit=sorted(_figure(fab, "runtime", "fabric.toml")), value=chip_key)
    lnc = int(rt["default_lnc"])  # a kernel's ranks are logical cores at the runtime's LNC
    return CollectiveFigures(
        chip=chip_key, dma_bytes_per_s=float(chip.dma_bandwidth_bytes_per_s),
        core_bytes_per_s=float(rt["core_dma_bytes_per_s"]) * lnc,
        core_pair_bytes_per_s=float(rt["core_pair_bytes_per_s"]) * lnc,
        port_bytes_per_s=float(port), efficiency=float(rt["bandwidth_efficiency"]),
        step_s=float(_figure(fab, "latency.step_s", "fabric.toml")),
        issue_overhead_s=float(_figure(own, "issue_overhead_s", "in_kernel_collectives.toml")),
        channels=int(_figure(own, "channels", "in_kernel_collectives.toml")))


def rank_rate(f: CollectiveFigures, ranks: int, chips: int) -> float:
    """Bytes/s one rank's transfer gets in a step where every rank of the group sends."""
    chips = max(1, chips)
    per_chip = -(-ranks // chips)  # ranks of the group on the busiest chip
    if chips == 1:
        return core_to_core_bw(per_chip, f.core_bytes_per_s, f.core_pair_bytes_per_s) / per_chip
    return f.port_bytes_per_s * f.efficiency * f.channels / per_chip


def collective_time_s(f: CollectiveFigures, kind: str, nbytes: float, ranks: int, chips: int
                      ) -> Tuple[float, float]:
    """(fixed latency s, transfer s) of one in-kernel collective: steps x step latency (+ issue
    overhead), and the bytes each rank moves over its rate."""
    if ranks <= 1:  # a local copy on the chip's DMA
        return f.issue_overhead_s, nbytes / f.dma_bytes_per_s
    lat, xfer = ring_collective_s(kind.replace("_", "-"), ranks, nbytes, rank_rate(f, ranks, chips), f.step_s)
    return f.issue_overhead_s + lat, xfer


def collective_transfer(chip_key: str, hardware_file: Optional[str], kind: str, nbytes: int, ranks: int,
                        chips: int) -> Tuple[float, float, float]:
    """(rate bytes/ns, fixed ns, efficiency) of a collective instruction's DMA: the rate that gives the
    closed-form transfer time, the step latencies as its fixed cost."""
    f = figures(chip_key, hardware_file)
    fixed_s, xfer_s = collective_time_s(f, kind, nbytes, ranks, chips)
    rate = nbytes / (xfer_s * 1e9) if xfer_s > 0 else float(max(nbytes, 1))
    return rate, fixed_s * 1e9, f.efficiency
