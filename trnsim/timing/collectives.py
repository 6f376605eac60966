"""Cost rule of in-kernel collectives (cost class "collective"): closed forms on the link figures.

Why a closed form here and not the fabric's flow simulator: ``fabric/`` sits above ``timing/``, and a
trace must stay re-timeable by ``timing.estimate(traces, target)`` alone (both schedulers, the C one
included, read a per-instruction DmaCost).  So this rule reads the *same figures* the fabric reads
(chips.toml: DMA bandwidth, NeuronLink bandwidth and ports; fabric.toml: per-step latency, achieved
link efficiency, link direction convention) and applies the fabric's own closed forms
(fabric/closed_form.py, the flow simulator's oracles) for one ring:

  all_reduce            2(n-1) steps of S/n          (S = source bytes)
  all_gather            (n-1) steps of S/n           (S = gathered destination bytes)
  reduce_scatter        (n-1) steps of S/n           (S = source bytes)
  all_to_all            (n-1) pairwise steps of S/n  (S = source bytes)
  collective_permute*   1 step of S                  (S = bytes sent or received)

each step costing ``step_s + chunk / B``.  ``B``, the rate one rank's transfer gets: ranks of one chip
share the chip's DMA bandwidth (the fabric's intra-chip capacity); ranks on several chips each drive
one NeuronLink port per direction, shared by the ranks of the group on one chip; both times the
chip family's achieved efficiency.  A group of one rank is a local DMA copy.
Not modelled: contention with other traffic, routes through intermediate chips, the skew between
ranks reaching the collective (each rank's instruction starts when its own inputs are ready).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from ..errors import HardwareFileError
from ..hardware import load_catalog
from ..hardware.loader import unwrap
from ..ir.trace import Instruction

STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
         "reduce_scatter": lambda n: n - 1, "all_to_all": lambda n: n - 1}
CHUNK_DIVIDES = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}


@dataclass(frozen=True)
class CollectiveFigures:
    """The figures one chip's in-kernel collectives are timed with (bytes/s, seconds)."""
    chip: str
    dma_bytes_per_s: float        # the chip's DMA bandwidth: capacity of core-to-core traffic
    port_bytes_per_s: float       # one NeuronLink port, one direction
    efficiency: float             # achieved fraction of the link rate (fabric.toml runtime)
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
    runtime = _figure(fab, "runtime", "fabric.toml").get(chip_key)
    eff = float(runtime["bandwidth_efficiency"]) if runtime else 1.0
    return CollectiveFigures(
        chip=chip_key, dma_bytes_per_s=float(chip.dma_bandwidth_bytes_per_s),
        port_bytes_per_s=float(port), efficiency=eff,
        step_s=float(_figure(fab, "latency.step_s", "fabric.toml")),
        issue_overhead_s=float(_figure(own, "issue_overhead_s", "in_kernel_collectives.toml")),
        channels=int(_figure(own, "channels", "in_kernel_collectives.toml")))


def rank_rate(f: CollectiveFigures, ranks: int, chips: int) -> float:
    """Bytes/s one rank's transfer gets in a step where every rank of the group sends."""
    chips = max(1, chips)
    per_chip = -(-ranks // chips)  # ranks of the group on the busiest chip
    if chips == 1:
        return f.dma_bytes_per_s * f.efficiency / per_chip
    return f.port_bytes_per_s * f.efficiency * f.channels / per_chip


def collective_time_s(f: CollectiveFigures, kind: str, nbytes: float, ranks: int, chips: int
                      ) -> tuple:
    """(fixed latency s, transfer s) of one in-kernel collective: steps x step latency (+ issue
    overhead), and the bytes each rank moves over its rate."""
    if ranks <= 1:  # a local copy on the chip's DMA
        return f.issue_overhead_s, nbytes / (f.dma_bytes_per_s * f.efficiency)
    steps = STEPS[kind](ranks) if kind in STEPS else 1
    chunk = nbytes / ranks if kind in CHUNK_DIVIDES else nbytes
    return (f.issue_overhead_s + steps * f.step_s,
            steps * chunk / rank_rate(f, ranks, chips))


def collective_cost(model, ins: Instruction):
    """The DmaCost of a collective instruction: its bytes, one DMA queue, the transfer rate that
    gives the closed-form transfer time, and the step latencies as the fixed cost."""
    from .costs import DmaCost
    f = figures(model.chip.key, getattr(model, "hardware_file", None))
    nbytes = int(ins.attr("bytes", 0) or 0)
    fixed_s, xfer_s = collective_time_s(f, ins.opcode, nbytes, int(ins.attr("ranks", 1) or 1),
                                        int(ins.attr("chips", 1) or 1))
    rate = nbytes / (xfer_s * 1e9) if xfer_s > 0 else float(max(nbytes, 1))
    return DmaCost(nbytes, 0, 1, rate, fixed_s * 1e9, float(nbytes), f.efficiency)
