"""Fabric figures from ``hardware/data/fabric.toml`` (merged with a user hardware file) as a frozen spec."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from typing import Dict, Mapping, Optional, Tuple

from ..errors import HardwareFileError
from ..hardware import load_catalog
from ..hardware.loader import unwrap


@dataclass(frozen=True)
class Runtime:
    """Per chip family, the collective runtime as it works: a fixed cost per launch, a cost per step each rank
    takes (per peer message in a mesh step), the fraction of link rate each algorithm class reaches
    (pipelined rings, recursive halving-doubling, mesh) and EFA reaches, and what carries bytes between the
    cores of one chip (a per-core DMA rate and a per core-pair path rate, per physical core)."""
    launch_overhead_s: float
    step_overhead_s: float
    bandwidth_efficiency: float  # pipelined rings (ring, dual-ring, torus-rings, hierarchical)
    rdh_efficiency: float
    mesh_efficiency: float
    efa_efficiency: float
    p2p_efficiency: float  # all-to-all and send-recv: no reduction, bulk DMA writes
    core_dma_bytes_per_s: float
    core_pair_bytes_per_s: float
    graph_call_overhead_s: float  # a collective inside a compiled graph: no launch, no per-message setup
    default_lnc: int

    def call(self, in_graph: bool) -> "Runtime":
        """These constants as one collective call pays them: standalone (a collective launched on its own, as
        nccom-test runs it: launch, a cost per message, the classes' own link fractions) or inside a compiled
        graph (one fixed cost; the mesh and RDH bytes at the rings' fraction)."""
        if not in_graph:
            return self
        # a compiled graph sets up its messages ahead of time: every class moves bytes at the rings' fraction
        return replace(self, launch_overhead_s=self.graph_call_overhead_s, step_overhead_s=0.0,
                       mesh_efficiency=self.bandwidth_efficiency, rdh_efficiency=self.bandwidth_efficiency)

    def class_efficiency(self, cls: str, op: str = "all-reduce") -> float:
        """Achieved fraction of NeuronLink rate of an algorithm class (ring, rdh, mesh) running ``op``."""
        if op in ("all-to-all", "send-recv"):
            return self.p2p_efficiency
        return {"ring": self.bandwidth_efficiency, "rdh": self.rdh_efficiency, "mesh": self.mesh_efficiency}[cls]


@dataclass(frozen=True)
class NcclRuntime:
    """One GPU generation's NCCL constants (seconds, fractions); latency tuples are (LL, LL128, Simple)."""
    base_s: Mapping[str, Tuple[float, float, float]]
    nvlink_hop_s: Mapping[str, Tuple[float, float, float]]
    net_hop_s: Mapping[str, Tuple[float, float, float]]
    ll_multinode_hop_factor: float
    ring_protocol_bw: Tuple[float, float, float]
    ring_ll_other: float
    tree_protocol_bw: Tuple[float, float, float]
    nvlink_efficiency: float
    network_efficiency: float
    nvls: bool
    nvls_algbw_fraction: float
    p2p_base_s: float
    launch_s: float


@dataclass(frozen=True)
class FabricConfig:
    """Everything the fabric model adds to the catalog; ``sources`` maps a dotted path to its source."""
    figure_counts_both_directions: bool
    efa_figure_per_direction: bool
    torus_ports_per_dim: int
    ring_ports: int
    step_s: float
    efa_step_s: float
    forward_hop_s: float
    ring_channels: int
    mesh_max_bytes: float
    rdh_max_bytes: float
    max_flat_chips: int
    max_flows_per_step: int
    max_pairwise_ranks: int
    fold_instances: int
    runtimes: Mapping[str, Runtime]
    nccl: Mapping = field(default_factory=dict, compare=False)  # the [nccl] section as read (GPU systems)
    nccl_runtimes: Mapping[str, NcclRuntime] = field(default_factory=dict, compare=False)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def runtime(self, chip: str) -> Runtime:
        """Runtime constants of a chip family (trn1, inf2, trn2, trn3)."""
        if chip not in self.runtimes:
            raise HardwareFileError(f"fabric.toml has no [runtime.{chip}] section",
                                    rule="hardware-file-missing", limit=sorted(self.runtimes), value=chip)
        return self.runtimes[chip]


def _get(t: Mapping, path: str, kind):
    cur = t
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            raise HardwareFileError(f"fabric.toml: missing {path}", rule="hardware-file-missing",
                                    hint="see trnsim/hardware/data/fabric.toml for the layout")
        cur = cur[part]
    if kind is bool:
        ok = isinstance(cur, bool)
    elif kind is int:
        ok = isinstance(cur, int) and not isinstance(cur, bool) and cur >= 1
    else:
        ok = isinstance(cur, (int, float)) and not isinstance(cur, bool) and cur >= 0
    if not ok:
        raise HardwareFileError(f"fabric.toml: {path} must be a {'positive ' if kind is int else ''}"
                                f"{kind.__name__}", rule="hardware-file-type", limit=kind.__name__,
                                value=repr(cur))
    return kind(cur)


def fabric_table(hardware_file: Optional[str] = None) -> Mapping:
    """fabric.toml as raw TOML (figures still wrapped), ``hardware_file``'s ``[fabric]`` merged over it."""
    raw = load_catalog(hardware_file).extra.get("fabric")
    if raw is None:  # a catalog that does not carry extra data files: read ours directly
        raw = _direct(hardware_file)
    return raw


@functools.lru_cache(maxsize=8)
def _direct(hardware_file: Optional[str]) -> Mapping:
    from ..hardware.loader import DATA_DIR, deep_merge, read_toml
    raw = read_toml(os.path.join(DATA_DIR, "fabric.toml"))
    if hardware_file:
        raw = deep_merge(raw, read_toml(hardware_file).get("fabric", {}))
    return raw


_PARSED: Dict[int, Tuple[Mapping, FabricConfig]] = {}  # id(raw table) -> (the table, kept alive; its config)


def load_fabric_config(hardware_file: Optional[str] = None) -> FabricConfig:
    """The fabric figures of the built-in catalog, with ``hardware_file`` merged over them (parsed once per
    catalog: the catalog itself is cached per file path)."""
    raw = fabric_table(hardware_file)
    hit = _PARSED.get(id(raw))
    if hit is None or hit[0] is not raw:
        hit = _PARSED[id(raw)] = (raw, _from_raw(raw))
    return hit[1]


def _from_raw(raw: Mapping) -> FabricConfig:
    sources: Dict[str, str] = {}
    t = unwrap(raw, "", sources, "fabric.toml")
    runtimes = {}
    for chip in t.get("runtime", {}):
        rt = Runtime(**{f: _get(t, f"runtime.{chip}.{f}", int if f == "default_lnc" else float)
                        for f in Runtime.__dataclass_fields__})
        for f in ("bandwidth_efficiency", "rdh_efficiency", "mesh_efficiency", "efa_efficiency", "p2p_efficiency"):
            if not 0 < getattr(rt, f) <= 1:
                raise HardwareFileError(f"fabric.toml: runtime.{chip}.{f} must lie in (0, 1]",
                                        rule="hardware-file-range", limit="(0, 1]", value=getattr(rt, f))
        for f in ("core_dma_bytes_per_s", "core_pair_bytes_per_s"):
            if getattr(rt, f) <= 0:
                raise HardwareFileError(f"fabric.toml: runtime.{chip}.{f} must be positive",
                                        rule="hardware-file-range", limit="> 0", value=getattr(rt, f))
        runtimes[chip] = rt
    return FabricConfig(
        figure_counts_both_directions=_get(t, "links.figure_counts_both_directions", bool),
        efa_figure_per_direction=_get(t, "links.efa_figure_per_direction", bool),
        torus_ports_per_dim=_get(t, "links.torus_ports_per_dim", int),
        ring_ports=_get(t, "links.ring_ports", int),
        step_s=_get(t, "latency.step_s", float),
        efa_step_s=_get(t, "latency.efa_step_s", float),
        forward_hop_s=_get(t, "latency.forward_hop_s", float),
        ring_channels=_get(t, "algorithms.ring_channels", int),
        mesh_max_bytes=_get(t, "algorithms.mesh_max_bytes", float),
        rdh_max_bytes=_get(t, "algorithms.rdh_max_bytes", float),
        max_flat_chips=_get(t, "simulator.max_flat_chips", int),
        max_flows_per_step=_get(t, "simulator.max_flows_per_step", int),
        max_pairwise_ranks=_get(t, "simulator.max_pairwise_ranks", int),
        fold_instances=_get(t, "simulator.fold_instances", int),
        runtimes=runtimes, nccl=t.get("nccl", {}),
        nccl_runtimes={g: _nccl_runtime(v, g) for g, v in t.get("nccl", {}).items() if g not in _NCCL_MAPS},
        sources=sources)


_NCCL_MAPS = ("gpu_generation", "network_name")  # plain name tables of [nccl], not generations


def _nccl_runtime(t: Mapping, gen: str) -> NcclRuntime:
    """A GPU generation's [nccl.<gen>] table (values unwrapped), checked, in seconds."""

    def lat(name):
        v = t[name]
        out = {}
        for algo in ("ring", "tree", "nvls"):
            trip = v.get(algo) if isinstance(v, Mapping) else None
            if not isinstance(trip, (list, tuple)) or len(trip) != 3 or min(trip) < 0:
                raise HardwareFileError(f"fabric.toml: nccl.{gen}.{name}.{algo} must be three latencies "
                                        "(LL, LL128, Simple) in microseconds", rule="hardware-file-type",
                                        limit="[LL, LL128, Simple] >= 0", value=trip)
            out[algo] = tuple(float(x) * 1e-6 for x in trip)
        return out

    def frac3(name):
        v = t[name]
        if not isinstance(v, (list, tuple)) or len(v) != 3 or not all(0 < x <= 1 for x in v):
            raise HardwareFileError(f"fabric.toml: nccl.{gen}.{name} must be three fractions in (0, 1]",
                                    rule="hardware-file-range", limit="(0, 1]", value=v)
        return tuple(float(x) for x in v)

    return NcclRuntime(base_s=lat("base_latency_us"), nvlink_hop_s=lat("nvlink_hop_us"), net_hop_s=lat("net_hop_us"),
                       ll_multinode_hop_factor=float(t["ll_multinode_hop_factor"]),
                       ring_protocol_bw=frac3("ring_protocol_bandwidth"), ring_ll_other=float(t["ring_ll_other"]),
                       tree_protocol_bw=frac3("tree_protocol_bandwidth"),
                       nvlink_efficiency=float(t["nvlink_efficiency"]), network_efficiency=float(t["network_efficiency"]),
                       nvls=bool(t["nvls"]), nvls_algbw_fraction=float(t["nvls_algbw_fraction"]),
                       p2p_base_s=float(t["p2p_base_us"]) * 1e-6, launch_s=float(t["launch_overhead_us"]) * 1e-6)

