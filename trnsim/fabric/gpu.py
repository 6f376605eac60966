"""GPU systems as fabric topologies: NVLink/NVSwitch domains joined by EFA / InfiniBand, timed as NCCL does.

A GPU system (gpus.toml: GPUs per system, the NVLink domain, NVLink and network bandwidth) becomes a
``GpuTopology``; ``nccl_candidates`` reduces every (algorithm, protocol) NCCL's tuner weighs to
time = latency + bytes / bandwidth, with the constants of fabric.toml's ``[nccl.<generation>]`` (NCCL's own
cost-model tables, see the data file), and ``nccl_time`` takes the fastest, as NCCL does.  Ranks are GPU
indices; the GPUs of one NVLink domain are consecutive."""
from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..errors import ConfigError, HardwareFileError
from .config import NcclRuntime, load_fabric_config

PROTOCOLS = ("LL", "LL128", "Simple")


@dataclass(frozen=True)
class GpuTopology:
    """``systems`` copies of a GPU system; bandwidths per GPU per direction (bytes/s), nominal."""
    system: str
    name: str
    gpu: str
    generation: str
    gpus_per_system: int
    domain: int  # GPUs of one NVLink domain
    systems: int
    nvlink_bw: float
    net_bw: float
    network: str  # the scale-out network's name (EFA, InfiniBand)
    runtime: NcclRuntime

    @property
    def n_ranks(self) -> int:
        """GPUs of the whole system."""
        return self.gpus_per_system * self.systems

    @property
    def units(self) -> int:
        """Systems joined by the network (as ``Topology.units``)."""
        return self.systems

    @property
    def lnc(self) -> int:
        """GPUs have no logical-core grouping: one rank per GPU."""
        return 1


def _catalog(hardware_file: Optional[str]):
    from ..hardware.gpus import load_gpu_catalog
    return load_gpu_catalog(user_file=hardware_file)


def gpu_system_key(system: str, hardware_file: Optional[str] = None) -> Optional[str]:
    """The gpus.toml key of a GPU system name or alias, or None when ``system`` is not a GPU system."""
    cat = _catalog(hardware_file)
    return cat.system(system).key if cat.has_system(system) else None


def gpu_system_names(hardware_file: Optional[str] = None) -> List[str]:
    """Every GPU system key and alias of the catalog."""
    systems = _catalog(hardware_file).systems.values()
    return [s.key for s in systems] + [a for s in systems for a in s.aliases]


@functools.lru_cache(maxsize=64)
def build_gpu_topology(system: str, systems: int = 1, hardware_file: Optional[str] = None) -> GpuTopology:
    """The GpuTopology of ``systems`` copies of a GPU system (p5.48xlarge, gb300-nvl72, ...)."""
    if not isinstance(systems, int) or isinstance(systems, bool) or systems < 1:
        raise ConfigError("instances must be a positive integer", rule="fabric-instances", limit=">= 1",
                          value=systems)
    key = gpu_system_key(system, hardware_file)
    if key is None:
        near = difflib.get_close_matches(str(system).lower(), gpu_system_names(hardware_file), n=3, cutoff=0.4)
        raise ConfigError(f"unknown GPU system {system!r}", rule="fabric-system", limit="a GPU system of gpus.toml",
                          value=system, hint=f"did you mean {', '.join(near)}?" if near else None)
    cat = _catalog(hardware_file)
    spec = cat.systems[key]
    gpu = cat.gpus[spec.gpu]
    cfg = load_fabric_config(hardware_file)
    nccl = cfg.nccl
    gen = nccl.get("gpu_generation", {}).get(spec.gpu)
    if gen is None or gen not in cfg.nccl_runtimes:
        raise HardwareFileError(f"fabric.toml: no NCCL generation for GPU {spec.gpu!r}",
                                rule="hardware-file-missing", limit=sorted(nccl.get("gpu_generation", {})),
                                value=spec.gpu, hint="add it under [nccl.gpu_generation]")
    names = nccl.get("network_name", {})
    gpus, domain = int(spec.gpus), int(spec.nvlink_domain)
    if domain < 1 or (gpus % domain and domain % gpus):
        raise HardwareFileError(f"gpus.toml: {key}: nvlink_domain {domain} does not tile {gpus} GPUs",
                                rule="hardware-file-range", limit=f"a divisor or multiple of {gpus}", value=domain)
    return GpuTopology(
        system=key, name=spec.name or key, gpu=spec.gpu, generation=gen, gpus_per_system=gpus,
        domain=min(domain, gpus * systems), systems=systems,
        # NVIDIA prints NVLink bandwidth summed over both directions (gpus.toml); a transfer uses one
        nvlink_bw=float(gpu.nvlink_bandwidth_bytes_per_s) / 2.0,
        # an Ethernet / IB line rate holds in each direction; the system's figure is shared by its GPUs
        net_bw=float(spec.network_bandwidth_bits_per_s) / 8.0 / gpus,
        network=str(names.get(key, names.get("default", "network"))), runtime=cfg.nccl_runtimes[gen])


# ------------------------------------------------------------------------------------------------ NCCL model
Candidate = Tuple[str, float, float, Tuple[str, ...]]  # (algorithm/protocol, latency s, bytes/s, links)


def group_shape(topo: GpuTopology, ranks: Sequence[int]) -> Tuple[int, int, int]:
    """(ranks, NVLink domains spanned, most ranks in one domain) of a group of GPU indices."""
    bad = [r for r in ranks if not 0 <= r < topo.n_ranks]
    if bad:
        raise ConfigError(f"rank {bad[0]} is not a GPU of {topo.systems} x {topo.system}", rule="fabric-ranks",
                          limit=f"0..{topo.n_ranks - 1}", value=bad[0])
    per: dict = {}
    for r in ranks:
        per[r // topo.domain] = per.get(r // topo.domain, 0) + 1
    return len(ranks), len(per), max(per.values())


def nccl_candidates(topo: GpuTopology, op: str, ranks: Sequence[int], runtime: bool = True) -> List[Candidate]:
    """Every (algorithm/protocol, latency, algorithm bandwidth, links) NCCL would weigh for ``op`` over ``ranks``
    (``op`` canonical; size as nccl-tests counts it).  ``runtime=False``: nominal links, no latency, Simple only."""
    n, nodes, ppn = group_shape(topo, ranks)
    rt = topo.runtime
    links = ("NVLink",) if nodes == 1 else ("NVLink", topo.network) if ppn > 1 else (topo.network,)
    eff_nvl = rt.nvlink_efficiency if runtime else 1.0
    eff_net = rt.network_efficiency if runtime else 1.0
    # NCCL orders its rings node by node and gives each channel its own NIC: every ring crosses a node
    # boundary once, so the ppn GPUs of a node together push the ring's bytes through ppn NICs
    bus = topo.nvlink_bw * eff_nvl if nodes == 1 else min(topo.nvlink_bw * eff_nvl, ppn * topo.net_bw * eff_net)
    protos = range(3) if runtime else (2,)

    def hops(algo, p, intra_steps, inter_steps):
        if not runtime:
            return 0.0
        intra = rt.nvlink_hop_s[algo][p] * (rt.ll_multinode_hop_factor if nodes > 1 and p == 0 else 1.0)
        return rt.base_s[algo][p] + intra_steps * intra + inter_steps * rt.net_hop_s[algo][p]

    out: List[Candidate] = []
    if op in ("all-to-all", "send-recv"):
        lat = rt.p2p_base_s + (rt.net_hop_s if nodes > 1 else rt.nvlink_hop_s)["ring"][2] if runtime else 0.0
        if op == "send-recv":
            bw = topo.net_bw * eff_net if nodes > 1 else topo.nvlink_bw * eff_nvl
            return [("p2p/Simple", lat, bw, links)]
        # each GPU sends (ppn-1)/n of its buffer over NVLink and (n-ppn)/n over its network share at once
        secs_per_byte = max((ppn - 1) / n / (topo.nvlink_bw * eff_nvl),
                            (n - ppn) / n / (topo.net_bw * eff_net) if nodes > 1 else 0.0)
        return [("p2p/Simple", lat, 1.0 / secs_per_byte, links)]
    steps = {"all-reduce": 2 * (n - 1), "all-gather": n - 1, "reduce-scatter": n - 1, "broadcast": n - 1}[op]
    inter = {"all-reduce": 2 * (nodes - 1)}.get(op, nodes - 1)
    for p in protos:
        f = rt.ring_protocol_bw[p] if runtime else 1.0
        if runtime and p == 0 and nodes == 1 and op != "all-reduce":
            f = rt.ring_ll_other
        # broadcast pipelines the whole buffer through the ring: algorithm bandwidth = bus bandwidth
        ratio = 1.0 if op == "broadcast" else n / steps
        out.append((f"ring/{PROTOCOLS[p]}", hops("ring", p, steps - inter, inter), bus * f * ratio, links))
    if op == "all-reduce":
        for p in protos:
            f = rt.tree_protocol_bw[p] if runtime else 1.0
            lat = hops("tree", p, 2 * (ppn - 1), 2 * int(math.log2(nodes))) if runtime else 0.0
            out.append((f"tree/{PROTOCOLS[p]}", lat, bus * f * 0.5, links))  # up then down: half the bus rate
        if rt.nvls and nodes == 1 and n > 2:
            lat = (rt.base_s["nvls"][2] + rt.nvlink_hop_s["nvls"][2]) if runtime else 0.0
            frac = rt.nvls_algbw_fraction if runtime else 1.0
            out.append(("nvls/Simple", lat, topo.nvlink_bw * frac, links))
    return out


def nccl_time(topo: GpuTopology, op: str, size: float, ranks: Sequence[int],
              runtime: bool = True) -> Tuple[str, float, Tuple[str, ...]]:
    """(algorithm/protocol, seconds including the call overhead, links) NCCL would pick for ``size`` bytes."""
    if len(ranks) <= 1 or size <= 0:
        return "none", 0.0, ()
    best = min(((lat + size / bw, name, links) for name, lat, bw, links in nccl_candidates(topo, op, ranks, runtime)),
               key=lambda x: x[0])
    return best[1], best[0] + (topo.runtime.launch_s if runtime else 0.0), best[2]
