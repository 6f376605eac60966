"""All-to-allv: every rank sends its own byte count to every other rank (MoE token routing), in one step."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .collectives import CollectiveResult, bus_factor
from .config import load_fabric_config
from .flowsim import simulate
from .runtime import class_topology, group_topology
from .schedule import RankSet, Schedule, chip_step
from .topology import build_topology


def alltoallv(system: str, matrix, ranks: Optional[Sequence[int]] = None, instances: int = 1,
              lnc: Optional[int] = None, hardware_file: Optional[str] = None, in_graph: bool = True) -> CollectiveResult:
    """``matrix[i][j]`` bytes from the i-th to the j-th rank of ``ranks`` (all cores when None), sent directly.

    The reported size is the mean bytes a rank sends (nccl-tests' all-to-all size per rank)."""
    cfg = load_fabric_config(hardware_file)
    base = build_topology(system, instances, lnc, hardware_file)
    rt = cfg.runtime(base.chip).call(in_graph)
    # the runtime's mesh writes: all-to-all's fraction of link rate, the cores' rates inside a chip
    topo = class_topology(group_topology(base, ranks), "mesh", rt, "all-to-all")
    rs = RankSet(topo, ranks)
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape != (rs.n, rs.n):
        raise ConfigError("the all-to-allv matrix must be ranks x ranks", rule="fabric-alltoallv",
                          limit=f"({rs.n}, {rs.n})", value=tuple(m.shape))
    if not np.all(np.isfinite(m)) or (m < 0).any():
        raise ConfigError("all-to-allv byte counts must be finite and non-negative", rule="fabric-alltoallv",
                          limit=">= 0", value=float(m[~np.isfinite(m) | (m < 0)][0]))
    if rs.chips() > cfg.max_flat_chips:
        raise ConfigError(f"all-to-allv over {rs.chips()} chips exceeds simulator.max_flat_chips",
                          rule="fabric-alltoallv", limit=cfg.max_flat_chips, value=rs.chips())
    r = rs.all_ranks()
    np.fill_diagonal(m, 0.0)  # a rank's block for itself stays in place
    step = chip_step(topo, np.repeat(r, r.size), np.tile(r, r.size), m.ravel(), 1, "all-to-allv")
    sim = simulate(topo, Schedule("all-to-all", "direct", (step,)))
    t = rt.launch_overhead_s + rt.step_overhead_s * (rs.n - 1) + sim.time_s  # one message per peer
    size = float(m.sum(axis=1).mean())
    algbw = size / t / 1e9
    return CollectiveResult(
        system=topo.system, op="all-to-allv", size_bytes=size, ranks=rs.n, chips=rs.chips(),
        instances=topo.units, lnc=topo.lnc, algorithm="direct", time_us=t * 1e6, algbw_gbps=algbw,
        busbw_gbps=algbw * bus_factor("all-to-all", rs.n), busiest_link=sim.busiest_link,
        busiest_link_utilization=sim.busiest_link_utilization, hierarchical=False, folded="",
        launch_overhead_us=rt.launch_overhead_s * 1e6, candidates=(("direct", t * 1e6),), skipped=())
