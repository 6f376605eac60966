"""``collective()``: time one collective on a system, picking the fastest algorithm as a runtime would."""
from __future__ import annotations

import difflib
import functools
from dataclasses import asdict, dataclass, replace
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import ConfigError
from .algorithms import ALGORITHMS, OPS, NotApplicable, WrongOp
from .config import load_fabric_config
from . import fast
from .flowsim import simulate
from .runtime import (CLASSES_OF, chosen_classes, class_order, class_topology, group_topology, messages,
                      padded_sizes)
from .gpu import GpuTopology, build_gpu_topology, gpu_system_key, nccl_candidates
from .schedule import RankSet
from .topology import Topology, build_topology
from .units import parse_size

FAST_MAX_RANKS = 65536  # larger groups (whole UltraClusters) report the flow simulation's choice only

_ALIASES = {"allreduce": "all-reduce", "allgather": "all-gather", "reducescatter": "reduce-scatter",
            "alltoall": "all-to-all", "sendrecv": "send-recv", "bcast": "broadcast",
            "all-to-allv": "all-to-all", "alltoallv": "all-to-all", "permute": "send-recv"}

# nccl-tests bus-bandwidth factors (busbw = algbw x factor)
_BUS = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-gather": lambda n: (n - 1) / n,
        "reduce-scatter": lambda n: (n - 1) / n, "all-to-all": lambda n: (n - 1) / n,
        "send-recv": lambda n: 1.0, "broadcast": lambda n: 1.0}


def canonical_op(op: str) -> str:
    """'allreduce', 'all_reduce', 'All-Reduce' -> 'all-reduce'; unknown names raise with a suggestion."""
    key = str(op).strip().lower().replace("_", "-")
    key = _ALIASES.get(key.replace("-", ""), key)
    if key in OPS:
        return key
    near = difflib.get_close_matches(key, OPS, n=2, cutoff=0.4)
    raise ConfigError(f"unknown collective {op!r}", rule="fabric-op", limit=list(OPS), value=op,
                      hint=f"did you mean {', '.join(near)}?" if near else None)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests factor from algorithm bandwidth to bus bandwidth for ``n`` ranks."""
    return _BUS[canonical_op(op)](n)


@dataclass(frozen=True)
class CollectiveResult:
    """Time and bandwidth of one collective, the algorithm used and the busiest link."""
    system: str
    op: str
    size_bytes: float
    ranks: int
    chips: int
    instances: int
    lnc: int
    algorithm: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    busiest_link: str
    busiest_link_utilization: float
    hierarchical: bool
    folded: str
    launch_overhead_us: float
    candidates: Tuple[Tuple[str, float], ...]
    skipped: Tuple[Tuple[str, str], ...]

    def to_dict(self) -> dict:
        """Plain JSON-able dict (candidates as {algorithm: time_us})."""
        d = asdict(self)
        d["candidates"] = {a: t for a, t in self.candidates}
        d["skipped"] = {a: why for a, why in self.skipped}
        return d


def ranks_for_count(topo: Topology, count: int) -> Optional[Tuple[int, ...]]:
    """``count`` ranks spread evenly over the units, the first cores of each (as nccom-test places them)."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ConfigError("the rank count must be a positive integer", rule="fabric-ranks", value=count)
    per_unit = topo.n_ranks // topo.units
    if count > topo.n_ranks or count % topo.units:
        raise ConfigError(f"{count} ranks do not fit {topo.units} x {topo.name} ({per_unit} cores each at "
                          f"LNC={topo.lnc}, ranks split evenly over instances)", rule="fabric-ranks",
                          limit=f"a multiple of {topo.units} up to {topo.n_ranks}", value=count)
    if count == topo.n_ranks:
        return None
    k = count // topo.units
    return tuple(u * per_unit + i for u in range(topo.units) for i in range(k))


def collective(system: str, op: str, size_bytes: Union[float, str], ranks: Union[None, int, Sequence[int]] = None,
               instances: int = 1, algorithm: Optional[str] = None, lnc: Optional[int] = None,
               hardware_file: Optional[str] = None, in_graph: bool = True) -> CollectiveResult:
    """Simulate ``op`` of ``size_bytes`` (nccl-tests convention) over ``ranks`` (logical cores; None = all).
    ``in_graph``: the collective runs inside a compiled graph, as a model's do (its one fixed cost); False:
    launched on its own, as nccom-test runs it (launch and per-message costs)."""
    op = canonical_op(op)
    size = parse_size(size_bytes)
    if gpu_system_key(system, hardware_file) is not None:
        return _gpu_collective(build_gpu_topology(system, instances, hardware_file), op, size, ranks, algorithm)
    topo = build_topology(system, instances, lnc, hardware_file)
    if isinstance(ranks, (int, np.integer)) and not isinstance(ranks, bool):
        ranks = ranks_for_count(topo, int(ranks))
    key = None if ranks is None else tuple(int(r) for r in ranks)
    return _cached(topo, op, size, key, algorithm, hardware_file, bool(in_graph))


@functools.lru_cache(maxsize=4096)
def _cached(topo: Topology, op: str, size: float, ranks, algorithm: Optional[str],
            hardware_file: Optional[str], in_graph: bool = True) -> CollectiveResult:
    cfg = load_fabric_config(hardware_file)
    topo = group_topology(topo, ranks)
    rs = RankSet(topo, ranks)
    rt = cfg.runtime(topo.chip).call(in_graph)
    n = rs.n
    if op == "send-recv" and n < 2:
        raise ConfigError("send-recv needs at least two ranks", rule="fabric-ranks", limit=">= 2", value=n)
    names, mode = _choose(algorithm, op, size, cfg)
    best, times, skipped = None, [], []
    if n > 1:
        best, times, skipped = runtime_schedule(topo, op, size, rs, cfg, names, rt, mode)
        if best is None:
            why = "; ".join(r for _, r in skipped)
            raise ConfigError(f"no algorithm can run {op} over {n} ranks of {topo.units} x {topo.name}"
                              f" ({why})", rule="fabric-algorithm", limit=names, value=algorithm or "runtime")
    if best is None:  # one rank: nothing moves
        return CollectiveResult(topo.system, op, size, n, rs.chips(), topo.units, topo.lnc, "none", 0.0,
                                0.0, 0.0, "none", 0.0, False, "", 0.0, (), tuple(skipped))
    t, sched, sim = best
    if mode == "runtime" and rs.n <= FAST_MAX_RANKS:
        # the time and algorithm an estimate charges (FabricComm's closed forms; exact for ring-type schedules,
        # within a few per cent of the flow simulation otherwise), the simulation's busiest link beside it
        group = tuple(int(r) for r in rs.all_ranks())
        cands = fast.candidates(topo, op, group, hardware_file, True, in_graph)
        if cands:
            name, t = fast.choose(cands, size, cfg, rt.step_overhead_s, True)
            if name != sched.algorithm:  # the busiest link of the algorithm reported
                alt, _, _ = best_schedule(topo, op, size, rs, cfg, (name,), rt=rt, mode="fastest")
                sched, sim = (alt[1], alt[2]) if alt else (replace(sched, algorithm=name), sim)
    t += rt.launch_overhead_s
    times = [(a, (x + rt.launch_overhead_s) * 1e6) for a, x in times]
    algbw = size / t / 1e9
    return CollectiveResult(
        system=topo.system, op=op, size_bytes=size, ranks=n, chips=rs.chips(), instances=topo.units,
        lnc=topo.lnc, algorithm=sched.algorithm, time_us=t * 1e6, algbw_gbps=algbw,
        busbw_gbps=algbw * bus_factor(op, n), busiest_link=sim.busiest_link,
        busiest_link_utilization=sim.busiest_link_utilization, hierarchical=sched.hierarchical,
        folded=sched.folded, launch_overhead_us=rt.launch_overhead_s * 1e6, candidates=tuple(times),
        skipped=tuple(skipped))


def runtime_schedule(topo: Topology, op: str, size: float, rs: RankSet, cfg, names: Sequence[str], rt, mode: str):
    """``best_schedule``, and with ``mode`` 'runtime' the least of it and the same group's choice at the first
    size of each later class (a message can be run padded: see fabric.runtime.padded_sizes)."""
    best, times, skipped = best_schedule(topo, op, size, rs, cfg, names, rt=rt, mode=mode)
    for padded in (padded_sizes(size, cfg) if mode == "runtime" and best is not None else ()):
        alt, _, _ = best_schedule(topo, op, padded, rs, cfg, names, rt=rt, mode=mode)
        if alt is not None and alt[0] < best[0]:
            best = alt
    return best, times, skipped


def best_schedule(topo: Topology, op: str, size: float, rs: RankSet, cfg, names: Sequence[str],
                  first_only: bool = False, rt=None, mode: str = "fastest"):
    """Choose and simulate; returns ((seconds, schedule, sim) of the chosen algorithm or None,
    [(name, seconds)], [(name, why it cannot run here)]).  Every candidate is first bounded by its closed form
    (exact for ring-type schedules, a lower bound otherwise); the competing ones (the size's class with
    ``mode`` 'runtime', all with 'fastest') are flow-simulated in bound order until the next bound cannot beat
    the best simulated time, so the simulator runs once or twice, not once per algorithm.  With the runtime
    constants ``rt`` each runs at its class's link-rate fraction and pays the runtime's cost per message
    (launch overhead excluded).  Pruned candidates report their bound; with 'runtime' only the chosen
    class's algorithms are built at all."""
    from .closed_form import schedule_pieces
    cands, skipped, failed = [], [], set()  # cands: (bound s, name, class, topology, schedule, software s)
    # 'runtime': only the size's class is built (the next one only when none of its algorithms can run)
    for group in (class_order(size, cfg) if mode == "runtime" else (None,)):
        for name in names:
            for cls in CLASSES_OF[name] if rt is not None else CLASSES_OF[name][:1]:
                if name in failed or (group is not None and cls != group):
                    continue
                t_topo = class_topology(topo, cls, rt, op) if rt is not None else topo
                try:
                    sched = ALGORITHMS[name](op, size, rs, t_topo, cfg)
                except WrongOp as e:  # does not implement this op at all: only worth saying when forced
                    if len(names) == 1:
                        skipped.append((name, str(e)))
                    failed.add(name)
                    continue
                except NotApplicable as e:
                    skipped.append((name, str(e)))
                    failed.add(name)
                    continue
                soft = rt.step_overhead_s * messages(sched) if rt is not None else 0.0
                a, b, r = schedule_pieces(t_topo, sched)
                cands.append((float(np.max(a + b, axis=1) @ r) + soft, name, cls, t_topo, sched, soft))
            if first_only and cands:
                break
        if cands:
            break
    if not cands:
        return None, [], skipped
    keep = chosen_classes(size, cfg, mode, {c[2] for c in cands})
    best, shown = None, {}
    for bound, name, cls, t_topo, sched, soft in sorted(cands, key=lambda c: c[0]):
        if cls in keep and (best is None or bound < best[0]):
            sim = simulate(t_topo, sched)
            t = sim.time_s + soft
            if best is None or t < best[0]:
                best = (t, sched, sim)
            shown[name] = min(t, shown.get(name, t))
        elif name not in shown:
            shown[name] = bound
    return best, [(n, shown[n]) for n in dict.fromkeys(c[1] for c in cands)], skipped


def _choose(algorithm: Optional[str], op: str, size: float, cfg) -> Tuple[Tuple[str, ...], str]:
    """(algorithms to try, how to choose): the runtime's pick by size class (default), the fastest of all
    (auto), or the one forced."""
    if algorithm in (None, "", "runtime"):
        return tuple(ALGORITHMS), "runtime"
    name = str(algorithm).strip().lower()
    if name in ("auto", "fastest"):
        return tuple(ALGORITHMS), "fastest"
    if name not in ALGORITHMS:
        near = difflib.get_close_matches(name, list(ALGORITHMS), n=2, cutoff=0.4)
        raise ConfigError(f"unknown algorithm {algorithm!r}", rule="fabric-algorithm",
                          limit=["runtime", "auto"] + list(ALGORITHMS), value=algorithm,
                          hint=f"did you mean {', '.join(near)}?" if near else None)
    return (name,), "fastest"


def _gpu_collective(topo: GpuTopology, op: str, size: float, ranks, algorithm: Optional[str]) -> CollectiveResult:
    """A GPU system's collective as NCCL would run it: the fastest (algorithm, protocol) of its cost model, or
    the fastest of those whose name starts with ``algorithm`` (ring, tree, nvls, ring/LL, ...)."""
    if ranks is None:
        group = tuple(range(topo.n_ranks))
    elif isinstance(ranks, (int, np.integer)) and not isinstance(ranks, bool):
        group = gpu_ranks_for_count(topo, int(ranks))
    else:
        group = tuple(int(r) for r in ranks)
    n = len(group)
    if op == "send-recv" and n < 2:
        raise ConfigError("send-recv needs at least two ranks", rule="fabric-ranks", limit=">= 2", value=n)
    cands = nccl_candidates(topo, op, group) if n > 1 else []
    if algorithm not in (None, "", "auto", "runtime") and cands:
        want = str(algorithm).strip().lower()
        kept = [c for c in cands if c[0].lower().startswith(want)]
        if not kept:
            raise ConfigError(f"NCCL has no {algorithm!r} for {op} over {n} GPUs", rule="fabric-algorithm",
                              limit=sorted({c[0] for c in cands}), value=algorithm)
        cands = kept
    launch = topo.runtime.launch_s
    times = sorted(((name, (lat + size / bw + launch) * 1e6) for name, lat, bw, _ in cands), key=lambda x: x[1])
    domains = len({r // topo.domain for r in group})
    if not times:
        return CollectiveResult(topo.system, op, size, n, n, topo.systems, 1, "none", 0.0, 0.0, 0.0, "none", 0.0,
                                False, "", 0.0, (), ())
    name, t_us = times[0]
    links = next(c[3] for c in cands if c[0] == name)
    algbw = size / (t_us * 1e-6) / 1e9
    ppn = max(sum(1 for r in group if r // topo.domain == d) for d in {r // topo.domain for r in group})
    nominal = min(topo.nvlink_bw, ppn * topo.net_bw) if domains > 1 else topo.nvlink_bw
    return CollectiveResult(
        system=topo.system, op=op, size_bytes=size, ranks=n, chips=n, instances=topo.systems, lnc=1, algorithm=name,
        time_us=t_us, algbw_gbps=algbw, busbw_gbps=algbw * bus_factor(op, n), busiest_link=links[-1],
        busiest_link_utilization=min(1.0, algbw * 1e9 * bus_factor(op, n) / nominal), hierarchical=domains > 1,
        folded="", launch_overhead_us=launch * 1e6, candidates=tuple(times), skipped=())


def gpu_ranks_for_count(topo: GpuTopology, count: int) -> Tuple[int, ...]:
    """``count`` GPUs spread evenly over the systems, the first GPUs of each (as nccl-tests places them)."""
    if count < 1 or count > topo.n_ranks or count % topo.systems:
        raise ConfigError(f"{count} ranks do not fit {topo.systems} x {topo.system} ({topo.gpus_per_system} GPUs "
                          "each, ranks split evenly over systems)", rule="fabric-ranks",
                          limit=f"a multiple of {topo.systems} up to {topo.n_ranks}", value=count)
    k = count // topo.systems
    return tuple(u * topo.gpus_per_system + i for u in range(topo.systems) for i in range(k))
