"""Flow-level network simulation on ``trnsim.des``: the flows of a step share links by max-min fairness.

A flow (src chip -> dst chip, bytes) follows the topology's route(s); it starts after its path latency
(a des event), and whenever a flow starts or finishes the rates of all active flows are recomputed by
progressive filling: raise every rate together, freeze the flows of a link when it fills, repeat.  A step
ends when its last flow has arrived; steps run one after another, a step with ``repeat`` r counts r times.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple

import numpy as np

from ..des import EventQueue
from ..errors import ConfigError
from .schedule import Schedule, Step
from .topology import Topology, route_table

_REL = 1e-12  # relative slack when deciding that projected finish times have been reached


def maxmin_rates(cap: np.ndarray, entry_flow: np.ndarray, entry_link: np.ndarray, nflows: int) -> np.ndarray:
    """Max-min fair rates of ``nflows`` flows; flow f uses the links listed where entry_flow == f."""
    rate = np.zeros(nflows)
    if nflows == 0:
        return rate
    rem = cap.astype(float).copy()
    fixed = np.zeros(nflows, dtype=bool)
    live = np.ones(entry_flow.size, dtype=bool)
    L = cap.size
    while live.any():
        counts = np.bincount(entry_link[live], minlength=L)
        used = counts > 0
        share = np.full(L, np.inf)
        share[used] = np.maximum(rem[used], 0.0) / counts[used]
        m = share.min()
        bottleneck = used & (share <= m * (1 + 1e-9))
        hit = np.zeros(nflows, dtype=bool)
        hit[entry_flow[live & bottleneck[entry_link]]] = True
        hit &= ~fixed
        rate[hit] = m
        fixed |= hit
        newly = live & fixed[entry_flow]
        rem -= np.bincount(entry_link[newly], minlength=L) * m
        live &= ~newly
    return rate


@dataclass(frozen=True)
class StepResult:
    """One step: its duration, the bytes it put on each link, and (when recorded) link loads over time."""
    time_s: float
    link_ids: np.ndarray
    link_bytes: np.ndarray
    capacity: np.ndarray
    intervals: Tuple[Tuple[float, float, np.ndarray], ...] = ()


def _expand(topo: Topology, step: Step):
    """Subflows (one per route of a flow) with their bytes and start latency, and the (subflow, link) pairs."""
    table = route_table(topo)
    keep = step.nbytes > 0
    pairs = list(zip(step.src[keep].tolist(), step.dst[keep].tolist()))
    fr, lat, n_links, links = [], [], [], []
    for s, d in pairs:
        for frac, ls, la in (table.get((s, d)) or topo.route(s, d)):
            fr.append(frac)
            lat.append(la)
            n_links.append(len(ls))
            links.extend(ls)
    paths_per_flow = np.fromiter((len(table[p]) for p in pairs), dtype=np.int64, count=len(pairs))
    sub_bytes = np.repeat(step.nbytes[keep], paths_per_flow) * np.asarray(fr, dtype=float)
    n_links = np.asarray(n_links, dtype=np.int64)
    ent_f = np.repeat(np.arange(n_links.size, dtype=np.int64), n_links)
    return sub_bytes, np.asarray(lat, dtype=float), ent_f, np.asarray(links, dtype=np.int64)


def simulate_step(topo: Topology, step: Step, record: bool = False) -> StepResult:
    """Run one step's flows to completion on ``topo``; ``record`` keeps per-interval link loads."""
    nbytes, lat, ent_f, ent_l0 = _expand(topo, step)
    link_ids, ent_l = np.unique(ent_l0, return_inverse=True)
    cap = topo.capacity(link_ids)
    if (cap <= 0).any():
        bad = int(link_ids[np.argmax(cap <= 0)])
        raise ConfigError(f"link '{topo.link_name(bad)}' of {topo.name} has no bandwidth figure",
                          rule="fabric-link", limit="> 0 bytes/s", value=0.0)
    n = nbytes.size
    link_bytes = np.bincount(ent_l, weights=nbytes[ent_f], minlength=link_ids.size) if n else np.zeros(0)
    if n == 0:
        return StepResult(0.0, link_ids, link_bytes, cap)
    q = EventQueue()
    for t in np.unique(lat):
        q.schedule(float(t), ("start", float(t)))
    active = np.zeros(n, dtype=bool)
    rem = nbytes.copy()
    rate = np.zeros(n)
    proj = np.full(n, np.inf)
    version = 0
    t_last = 0.0
    end = 0.0
    intervals = []
    while len(q):
        kind, tag = q.step()
        if kind == "done" and tag != version:
            continue  # rates changed since this completion was projected
        now = q.now
        rem[active] -= rate[active] * (now - t_last)
        if kind == "start":
            active |= lat == tag
        done = active & (proj <= now * (1 + _REL) + 1e-18)
        if done.any():
            active &= ~done
            rem[done] = 0.0
            end = now
        live_e = active[ent_f]
        rate = np.zeros(n)
        if active.any():
            r = maxmin_rates(cap, ent_f[live_e], ent_l[live_e], n)
            rate[active] = r[active]
            proj = np.full(n, np.inf)
            proj[active] = now + rem[active] / rate[active]
            version += 1
            q.schedule(float(proj[active].min()), ("done", version))
            if record:
                load = np.bincount(ent_l[live_e], weights=rate[ent_f[live_e]], minlength=link_ids.size)
                intervals.append((now, float(proj[active].min()), load))
        t_last = now
    return StepResult(end, link_ids, link_bytes, cap, tuple(intervals))


@dataclass(frozen=True)
class SimResult:
    """A whole schedule: network time (no launch overhead), per-step times, the busiest link."""
    time_s: float
    step_times_s: Tuple[float, ...]
    busiest_link: str
    busiest_link_bytes: float
    busiest_link_utilization: float
    flows_simulated: int
    link_bytes: Dict[int, float] = field(default_factory=dict, compare=False, repr=False)


def simulate(topo: Topology, schedule: Schedule) -> SimResult:
    """Simulate every step of ``schedule`` in order (a repeated step is simulated once)."""
    total = 0.0
    times = []
    acc: Dict[int, float] = {}
    busy_time: Dict[int, float] = {}
    flows = 0
    for step in schedule.steps:
        r = simulate_step(topo, step)
        times.append(r.time_s)
        total += r.time_s * step.repeat
        flows += step.flows
        for lid, b, c in zip(r.link_ids.tolist(), r.link_bytes.tolist(), r.capacity.tolist()):
            acc[lid] = acc.get(lid, 0.0) + b * step.repeat
            busy_time[lid] = busy_time.get(lid, 0.0) + b * step.repeat / c
    if not acc:
        return SimResult(total, tuple(times), "none", 0.0, 0.0, flows, acc)
    lid = max(busy_time, key=busy_time.get)
    util = busy_time[lid] / total if total > 0 else 0.0
    return SimResult(total, tuple(times), topo.link_name(lid), acc[lid], min(util, 1.0), flows, acc)

