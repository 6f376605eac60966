"""The fast path: the runtime's choice from closed forms (every algorithm of a regular-grid group reduced to
affine pieces per step, memoized per group), shared by ``FabricComm`` and ``collective`` so an estimate
charges what ``trnsim collective`` prints."""
from __future__ import annotations

import functools
from typing import Optional, Tuple

from .algorithms import ALGORITHMS
from .closed_form import algorithm_pieces, piece_times
from .config import load_fabric_config
from .runtime import CLASSES_OF, class_topology, padded_sizes, pick
from .schedule import RankSet


@functools.lru_cache(maxsize=8192)
def candidates(topo, op: str, group: Tuple[int, ...], hardware_file: Optional[str], runtime: bool,
               in_graph: bool) -> Optional[list]:
    """(algorithm, class, a, b, repeat, messages) of every algorithm that can run ``op`` on a regular-grid
    group, each class at its own link fraction; None for an irregular group (simulate it instead)."""
    rs = RankSet(topo, group)
    if not rs.is_grid:
        return None
    cfg = load_fabric_config(hardware_file)
    rt = cfg.runtime(topo.chip).call(in_graph) if runtime else None
    out = []
    for cls in ("mesh", "rdh", "ring"):
        names = tuple(n for n in ALGORITHMS if cls in CLASSES_OF[n][:None if runtime else 1])
        out += [(c[0], cls) + c[1:] for c in algorithm_pieces(class_topology(topo, cls, rt, op) if rt else topo,
                                                                op, rs, cfg, names)]
    return out


def choose(cands, size: float, cfg, step_s: float, runtime: bool) -> Tuple[str, float]:
    """(algorithm, seconds without the call's fixed cost) the runtime picks at ``size`` from ``candidates``:
    the size's class (or the fastest with ``runtime`` False), padded to a later class's first size where
    that is quicker (see fabric.runtime.padded_sizes)."""
    def at(s):
        times = piece_times([(c[0],) + c[2:] for c in cands], s, step_s)
        return pick([(n, c[1], t) for (n, t), c in zip(times, cands)], s, cfg, "runtime" if runtime else "fastest")
    name, t = at(size)
    for padded in padded_sizes(size, cfg) if runtime else ():
        alt = at(padded)
        if alt[1] < t:
            name, t = alt
    return name, t
