"""Topologies as data: chips, directed links (capacity per direction, latency) and routing.

Chips are numbered unit by unit (a unit is an instance or an UltraServer; units meet over EFA), and
inside a unit in row-major order over the topology's dims (x fastest).  Links are never listed: a link
id is computed from (chip, port), so a million-chip UltraCluster costs no memory until a flow uses it.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import List, Optional, Tuple

import numpy as np

from ..errors import ConfigError
from ..hardware import load_catalog
from ..hardware.collective_forms import core_to_core_bw
from .config import FabricConfig, load_fabric_config

Route = Tuple[Tuple[float, Tuple[int, ...], float], ...]  # (fraction of bytes, link ids, latency s)

LINK_KINDS = ("chip", "torus", "switch-up", "switch-down", "efa-out", "efa-in")


@dataclass(frozen=True)
class Axis:
    """One coordinate of a rank: name, size, and the fabric its neighbours meet over."""
    name: str
    size: int
    domain: str  # "chip" (cores of one chip), "neuronlink", "switch" or "efa"


@dataclass(frozen=True)
class Topology:
    """A whole system: ``units`` instances or UltraServers of ``chips_per_unit`` chips each."""
    system: str
    name: str
    chip: str
    topology: str  # single | ring | torus2d | torus3d | switch
    dims: Tuple[int, ...]  # chips per unit along each fabric dim (switch: chips per server, servers)
    units: int
    cores_per_chip: int  # logical cores (ranks) per chip at this LNC
    lnc: int
    intra_chip_bw: float  # bytes/s per direction, nominal
    dim_bw: Tuple[float, ...]  # per port per direction, nominal, one per dim (torus / ring)
    switch_bw: float
    efa_bw: float
    switch_extra_levels: int
    efficiency: float  # NeuronLink / switch / intra-chip links
    step_s: float
    efa_step_s: float
    forward_hop_s: float
    efa_efficiency: float = 1.0
    core_bw: float = 0.0  # one rank's DMA rate to the other cores of its chip (bytes/s per direction)
    core_pair_bw: float = 0.0  # the path between two cores of one chip (bytes/s per direction)

    # ---------------------------------------------------------------------------------- sizes
    @property
    def chips_per_unit(self) -> int:
        """Chips in one instance or UltraServer."""
        return math.prod(self.dims) if self.dims else 1

    @property
    def n_chips(self) -> int:
        """Chips of the whole system."""
        return self.chips_per_unit * self.units

    @property
    def n_ranks(self) -> int:
        """Logical cores (ranks) of the whole system."""
        return self.n_chips * self.cores_per_chip

    @property
    def axes(self) -> Tuple[Axis, ...]:
        """Rank coordinates, innermost first: core, the fabric dims, then the EFA unit."""
        dom = "switch" if self.topology == "switch" else "neuronlink"
        names = ("server-chip", "server") if self.topology == "switch" else ("x", "y", "z")
        out = [Axis("core", self.cores_per_chip, "chip")]
        out += [Axis(names[i] if i < len(names) else f"d{i}", d, dom) for i, d in enumerate(self.dims)]
        out.append(Axis("instance", self.units, "efa"))
        return tuple(out)

    # ---------------------------------------------------------------------------------- link ids
    def _base(self) -> Tuple[int, int, int]:
        n = self.n_chips
        nd = max(1, len(self.dims))
        torus = n
        switch = torus + n * nd * 2
        efa = switch + n * 2
        return torus, switch, efa

    def kind_of(self, ids: np.ndarray) -> np.ndarray:
        """Index into LINK_KINDS of each link id."""
        t, s, e = self._base()
        ids = np.asarray(ids)
        k = np.zeros(ids.shape, dtype=np.int64)
        k[ids >= t] = 1
        k[ids >= s] = 2 + (ids[ids >= s] - s) % 2
        k[ids >= e] = 4 + (ids[ids >= e] - e) % 2
        return k

    def capacity(self, ids: np.ndarray, nominal: bool = False) -> np.ndarray:
        """Capacity per direction (bytes/s) of each link id; scaled by the runtime efficiency unless nominal."""
        t, s, e = self._base()
        ids = np.asarray(ids, dtype=np.int64)
        cap = np.full(ids.shape, self.intra_chip_bw, dtype=float)
        nd = max(1, len(self.dims))
        torus = (ids >= t) & (ids < s)
        if torus.any():
            dim = ((ids[torus] - t) // 2) % nd
            cap[torus] = np.asarray(self.dim_bw + (0.0,) * nd)[dim]
        cap[(ids >= s) & (ids < e)] = self.switch_bw
        if nominal:
            cap[ids >= e] = self.efa_bw
            return cap
        # the core-to-core rates are what the cores' DMA achieves (measured), not a nominal link rate
        cap[ids >= t] *= self.efficiency
        cap[ids >= e] = self.efa_bw * self.efa_efficiency
        return cap

    def with_runtime(self, rt) -> "Topology":
        """This topology with a chip family's runtime figures: link-rate fractions, and the core-to-core rates
        (per physical core in the data file: a logical core of LNC=2 drives two cores' DMA queues)."""
        core, pair = rt.core_dma_bytes_per_s * self.lnc, rt.core_pair_bytes_per_s * self.lnc
        return replace(self, efficiency=rt.bandwidth_efficiency, efa_efficiency=rt.efa_efficiency, core_bw=core,
                       core_pair_bw=pair, intra_chip_bw=core_to_core_bw(self.cores_per_chip, core, pair))

    def for_group(self, ranks_per_chip: int) -> "Topology":
        """This topology with the chip's core-to-core capacity a collective gets when ``ranks_per_chip`` of its
        ranks share a chip: each rank's DMA rate, bounded by the core-pair paths the ranks have between them."""
        k = max(1, int(ranks_per_chip))
        if not self.core_bw or k == 1:
            return self
        bw = core_to_core_bw(k, self.core_bw, self.core_pair_bw)
        return self if bw == self.intra_chip_bw else replace(self, intra_chip_bw=bw)

    def link_name(self, link: int) -> str:
        """Readable name of a link id, e.g. 'chip 3 x+ (NeuronLink)'."""
        t, s, e = self._base()
        if link < t:
            return f"chip {link} core-to-core (intra-chip)"
        if link < s:
            r = link - t
            c, rest = divmod(r, max(1, len(self.dims)) * 2)
            d, direction = divmod(rest, 2)
            ax = self.axes[1 + d].name
            return f"chip {c} {ax}{'+-'[direction]} (NeuronLink)"
        if link < e:
            c, up = divmod(link - s, 2)
            return f"chip {c} {'to' if up == 0 else 'from'} switch (NeuronSwitch)"
        c, inn = divmod(link - e, 2)
        return f"chip {c} EFA {'out' if inn == 0 else 'in'}"

    def _torus_link(self, chip: int, dim: int, direction: int) -> int:
        t, _, _ = self._base()
        return t + (chip * max(1, len(self.dims)) + dim) * 2 + direction

    # ---------------------------------------------------------------------------------- routing
    def route(self, src: int, dst: int) -> Route:
        """Paths from chip ``src`` to chip ``dst``: dimension order on a torus (ties split in half),
        through the switch on a switched fabric, over EFA between units."""
        table = route_table(self)
        r = table.get((src, dst))
        if r is None:
            r = table[(src, dst)] = _route(self, src, dst)
        return r

    def local_coords(self, local: int) -> List[int]:
        """Coordinates along the fabric dims of a chip's index inside its unit."""
        out = []
        for d in self.dims:
            local, c = divmod(local, d)
            out.append(c)
        return out


@lru_cache(maxsize=64)
def route_table(topo: Topology) -> dict:
    """The memo of routes of one topology (hashing a Topology once per step, not once per flow)."""
    return {}


def _route(topo: Topology, src: int, dst: int) -> Route:
    if src == dst:
        return ((1.0, (src,), topo.step_s),)
    cpu = topo.chips_per_unit
    if src // cpu != dst // cpu:
        _, _, e = topo._base()
        return ((1.0, (e + 2 * src, e + 2 * dst + 1), topo.efa_step_s),)
    if topo.topology == "switch":
        _, s, _ = topo._base()
        same_server = (src % cpu) // topo.dims[0] == (dst % cpu) // topo.dims[0]
        extra = 0 if same_server else topo.switch_extra_levels
        return ((1.0, (s + 2 * src, s + 2 * dst + 1), topo.step_s + extra * topo.forward_hop_s),)
    # torus or ring: dimension-order routing, the shorter way round each ring
    base = src - src % cpu
    cur = topo.local_coords(src % cpu)
    want = topo.local_coords(dst % cpu)
    paths: List[Tuple[float, List[int], List[int]]] = [(1.0, list(cur), [])]
    for d, k in enumerate(topo.dims):
        delta = (want[d] - cur[d]) % k
        if delta == 0:
            continue
        choices = [(0, delta)] if delta * 2 < k else [(1, k - delta)] if delta * 2 > k \
            else [(0, delta), (1, k - delta)]
        new = []
        for frac, pos, links in paths:
            for direction, hops in choices:
                p, ls = list(pos), list(links)
                for _ in range(hops):
                    chip = base + _flat(p, topo.dims)
                    ls.append(topo._torus_link(chip, d, direction))
                    p[d] = (p[d] + (1 if direction == 0 else -1)) % k
                new.append((frac / len(choices), p, ls))
        paths = new
    return tuple((f, tuple(ls), topo.step_s + (len(ls) - 1) * topo.forward_hop_s) for f, _, ls in paths)


def _flat(coords, dims) -> int:
    v, m = 0, 1
    for c, d in zip(coords, dims):
        v += c * m
        m *= d
    return v


# -------------------------------------------------------------------------------------- building
def system_names(hardware_file: Optional[str] = None) -> List[str]:
    """Every name `build_topology` accepts: instance and UltraServer keys, their aliases, chip keys."""
    cat = load_catalog(hardware_file)
    names = list(cat.instances) + [a for i in cat.instances.values() for a in i.aliases]
    return names + sorted(cat.chips)


def build_topology(system: str, instances: int = 1, lnc: Optional[int] = None,
                   hardware_file: Optional[str] = None,
                   config: Optional[FabricConfig] = None) -> Topology:
    """The Topology of ``instances`` copies of an instance / UltraServer (or one bare chip) joined by EFA."""
    cat = load_catalog(hardware_file)
    cfg = config or load_fabric_config(hardware_file)
    if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
        raise ConfigError("instances must be a positive integer", rule="fabric-instances",
                          limit=">= 1", value=instances)
    key = str(system).strip().lower()
    if key in cat.chips:
        spec, chip = None, cat.chips[key]
        if instances != 1:
            raise ConfigError(f"a bare chip ({key}) has no EFA; name an instance to join several",
                              rule="fabric-instances", limit=1, value=instances,
                              hint="e.g. --system trn1.2xlarge --instances 2")
    else:
        try:
            spec = cat.instance(system)
        except ConfigError:
            near = difflib.get_close_matches(key, system_names(hardware_file), n=3, cutoff=0.4)
            raise ConfigError(f"unknown system {system!r}", rule="fabric-system",
                              limit="an instance, UltraServer or chip of the catalog (trnsim hw list)",
                              value=system, hint=f"did you mean {', '.join(near)}?" if near else
                              "trnsim hw list shows the catalog") from None
        chip = cat.chips[spec.chip]
    core = cat.cores[chip.core]
    rt = cfg.runtime(chip.key)
    lnc = rt.default_lnc if lnc is None else lnc
    if lnc not in core.lnc or chip.cores % lnc:
        raise ConfigError(f"LNC={lnc} is not available on {chip.name}", rule="fabric-lnc",
                          limit=list(core.lnc), value=lnc)
    both = 2.0 if cfg.figure_counts_both_directions else 1.0
    dims: Tuple[int, ...] = ()
    dim_bw: Tuple[float, ...] = ()
    switch_bw, efa_bw, extra, topo = 0.0, 0.0, 0, "single"
    if spec is not None:
        topo = spec.topology
        if topo in ("torus2d", "torus3d", "ring"):
            dims = tuple(spec.topology_dims)
            if topo == "ring":
                dim_bw = (spec.chip_link_bandwidth_bytes_per_s / cfg.ring_ports / both,)
            else:
                # NeuronLink within a node covers the node's dims; a torus3d's last dim joins the nodes
                node_dims = len(dims) - (1 if spec.nodes > 1 else 0)
                per = spec.chip_link_bandwidth_bytes_per_s / (node_dims * cfg.torus_ports_per_dim) / both
                dim_bw = tuple([per] * node_dims)
                if spec.nodes > 1:
                    dim_bw += (spec.inter_node_link_bandwidth_bytes_per_s / cfg.torus_ports_per_dim / both,)
        elif topo == "switch":
            dims = (spec.chips_per_node, spec.nodes)
            switch_bw = spec.chip_link_bandwidth_bytes_per_s / both
            extra = max(0, spec.switch_levels - 1) * 2  # up and down through the upper levels
        if instances > 1:
            if not spec.efa_bits_per_s_per_chip:
                raise ConfigError(f"{spec.key} has no EFA figure; it cannot be joined to other instances",
                                  rule="fabric-instances", limit=1, value=instances)
            efa_bw = spec.efa_bits_per_s_per_chip / 8.0 / (1.0 if cfg.efa_figure_per_direction else 2.0)
    return Topology(system=spec.key if spec else chip.key, name=spec.name if spec else chip.name,
                    chip=chip.key, topology=topo, dims=dims, units=instances,
                    cores_per_chip=chip.cores // lnc, lnc=lnc, intra_chip_bw=0.0,
                    dim_bw=dim_bw, switch_bw=switch_bw, efa_bw=efa_bw, switch_extra_levels=extra,
                    efficiency=1.0, step_s=cfg.step_s, efa_step_s=cfg.efa_step_s,
                    forward_hop_s=cfg.forward_hop_s).with_runtime(rt)
