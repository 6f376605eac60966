"""Collectives on a GPU cluster: a two-level alpha-beta model, NVLink/NVSwitch inside a domain (8 GPUs of an
HGX box, 72 of an NVL72 rack) and EFA / InfiniBand between domains.

Same protocol and size convention as ``trnsim.model.comm`` (``time_s(op, size_bytes, ranks)``): rings at each
level the ranks span, the buffer shrinking level by level; figures from ``data/estimator.toml``.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from ...errors import ConfigError
from .efficiency import estimator_figures
from .systems import GpuCatalog, GpuSystemSpec, load_gpu_catalog

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast")


class GpuComm:
    """Alpha-beta collectives over GPU ranks 0..N-1 of ``nodes`` x ``system`` (ranks of one NVLink domain
    are consecutive)."""

    def __init__(self, system: str, nodes: int = 1, catalog: Optional[GpuCatalog] = None,
                 figures: Optional[Mapping[str, float]] = None):
        cat = catalog or load_gpu_catalog()
        self.spec: GpuSystemSpec = cat.system(system)
        gpu = cat.gpus[self.spec.gpu]
        f = dict(figures or estimator_figures())
        self.nodes = int(nodes)
        self.domain = self.spec.nvlink_domain
        # NVIDIA prints NVLink bandwidth summed over both directions: a ring uses one direction per hop
        self.nvlink_bw = gpu.nvlink_bandwidth_bytes_per_s / 2.0 * f["comm.nvlink_efficiency"]
        self.net_bw = self.spec.network_bits_per_s_per_gpu / 8.0 * f["comm.network_efficiency"]
        self.a_nvl, self.a_net = f["comm.nvlink_latency_s"], f["comm.network_latency_s"]
        self.overhead = f["comm.call_overhead_s"]

    def _levels(self, ranks: Sequence[int]) -> List[Tuple[int, float, float]]:
        """(group size, bandwidth per rank, latency per step) at each level the ranks span, innermost first."""
        doms = {r // self.domain for r in ranks}
        inner = max(1, len(ranks) // len(doms))
        out = []
        if inner > 1:
            out.append((inner, self.nvlink_bw, self.a_nvl))
        if len(doms) > 1:
            # the ranks of one domain share its GPUs' NICs in parallel: each sends over its own NIC
            out.append((len(doms), self.net_bw, self.a_net))
        return out

    def _pass(self, size: float, ranks: Sequence[int]) -> Tuple[float, float]:
        lat = xfer = 0.0
        s = float(size)
        for g, bw, a in self._levels(ranks):
            lat += (g - 1) * a
            xfer += (g - 1) / g * s / bw
            s /= g
        return lat, xfer

    def time_s(self, op: str, size_bytes: float, ranks: Sequence[int]) -> float:
        """Seconds of collective ``op`` of ``size_bytes`` over GPU ``ranks`` (call overhead included)."""
        if op not in COLLECTIVES:
            raise ConfigError(f"unknown collective {op!r}", rule="collective", limit=COLLECTIVES, value=op)
        ranks = list(ranks)
        if len(ranks) <= 1 or size_bytes <= 0:
            return 0.0
        levels = self._levels(ranks)
        if op == "all-reduce":
            lat, xfer = self._pass(size_bytes, ranks)
            return 2.0 * (lat + xfer) + self.overhead
        if op in ("all-gather", "reduce-scatter", "broadcast"):
            return sum(self._pass(size_bytes, ranks)) + self.overhead
        if op == "send-recv":
            _, bw, a = levels[-1]
            return a + size_bytes / bw + self.overhead
        # all-to-all: the slowest level carries the share addressed outside the group below it
        n, inner, worst = len(ranks), 1, 0.0
        for g, bw, a in levels:
            worst = max(worst, a * (g - 1) + size_bytes * (1.0 - inner / n) / bw)
            inner *= g
        return worst + self.overhead
