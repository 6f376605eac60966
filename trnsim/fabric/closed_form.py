"""Closed forms for collectives: the fast path (``algorithm_pieces``: every algorithm's schedule reduced to affine
pieces per step) and, re-exported from ``hardware.collective_forms``, the hand oracles (ring, RDH, switch and
torus all-to-all) the flow simulator is tested against."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

# the hand oracles live with the catalog, where the in-kernel collective timing reads them too
from ..hardware.collective_forms import (rdh_all_reduce_s, ring_all_gather_s, ring_all_reduce_s,  # noqa: F401
                                         switch_all_to_all_s, torus_all_to_all_bound_s)


# ------------------------------------------------------------------------------------------------------
# The fast path: every algorithm's schedule reduced, step by step, to a few affine pieces a + b x size.
# A step cannot end before any link has drained the bytes routed over it, counted from the earliest start
# (path latency) of a flow on that link, nor before any flow has crossed its slowest link after its own
# start.  The step time is the largest of those bounds: exact when the flows of a step start together and
# share their bottleneck evenly (ring, torus-ring, dual-ring, hierarchical and switch schedules), a lower
# bound within the tolerance stated in tests/fabric/test_closed_form.py otherwise (multi-hop mesh steps).
Pieces = Tuple[Tuple[float, float], ...]  # (a s, b s per byte of the collective's size)


def expand(topo, step):
    """The subflows of a step exactly as the flow simulator routes them (bytes, start latency, and the
    (subflow, link) incidence), computed with array arithmetic over all flows instead of route by route."""
    keep = step.nbytes > 0
    src, dst = step.src[keep].astype(np.int64), step.dst[keep].astype(np.int64)
    nb = step.nbytes[keep].astype(float)
    cpu = topo.chips_per_unit
    t0, s0, e0 = topo._base()
    same, cross = src == dst, src // cpu != dst // cpu
    inner = ~same & ~cross
    out = [(nb[same], np.full(int(same.sum()), topo.step_s), [src[same]]),          # through the chip's DMA
           (nb[cross], np.full(int(cross.sum()), topo.efa_step_s),                   # EFA out, then in
            [e0 + 2 * src[cross], e0 + 2 * dst[cross] + 1])]
    if inner.any():
        if topo.topology == "switch":
            a, b = src[inner], dst[inner]
            other = (a % cpu) // topo.dims[0] != (b % cpu) // topo.dims[0]
            lat = topo.step_s + other * topo.switch_extra_levels * topo.forward_hop_s
            out.append((nb[inner], lat, [s0 + 2 * a, s0 + 2 * b + 1]))
        else:
            out.append(_torus_paths(topo, src[inner], dst[inner], nb[inner], t0))
    sub_b, sub_l, ent_f, links, n = [], [], [], [], 0
    for b, lat, hops in out:
        if not b.size:
            continue
        for h in hops if isinstance(hops, list) else [hops]:
            if isinstance(h, tuple):  # (subflow index within this part, link) pairs
                ent_f.append(h[0] + n)
                links.append(h[1])
            else:                     # one link per subflow
                ent_f.append(np.arange(b.size) + n)
                links.append(h)
        sub_b.append(b)
        sub_l.append(np.broadcast_to(lat, b.shape).astype(float))
        n += b.size
    if not sub_b:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return (np.concatenate(sub_b), np.concatenate(sub_l), np.concatenate(ent_f).astype(np.int64),
            np.concatenate(links).astype(np.int64))


def _torus_paths(topo, src, dst, nb, t0):
    """Dimension-order routes on a torus / ring, the shorter way round each ring, a tie split in half."""
    dims, nd = topo.dims, max(1, len(topo.dims))
    cpu = topo.chips_per_unit
    base = src - src % cpu
    cur, want, mult, m = [], [], [], 1
    ls, ld = src % cpu, dst % cpu
    for k in dims:
        ls, c = np.divmod(ls, k)
        ld, w = np.divmod(ld, k)
        cur.append(c)
        want.append(w)
        mult.append(m)
        m *= k
    flow = np.arange(src.size)
    frac = np.ones(src.size)
    minus = []  # per dim: does the path go the minus way round
    for d, k in enumerate(dims):
        delta = (want[d][flow] - cur[d][flow]) % k
        tie = (2 * delta == k) & (delta > 0)
        dup = np.flatnonzero(tie)
        flow = np.concatenate([flow, flow[dup]])
        frac = np.concatenate([frac, frac[dup]])
        frac[np.concatenate([dup, np.arange(frac.size - dup.size, frac.size)])] *= 0.5
        minus = [np.concatenate([mv, mv[dup]]) for mv in minus]
        mv = 2 * delta > k
        minus.append(np.concatenate([mv, np.ones(dup.size, dtype=bool)]))
    hops_total = np.zeros(flow.size, dtype=np.int64)
    ent, links = [], []
    for d, k in enumerate(dims):
        delta = (want[d][flow] - cur[d][flow]) % k
        hops = np.where(minus[d], (k - delta) % k, delta)
        hops_total += hops
        rep = np.repeat(np.arange(flow.size), hops)
        if not rep.size:
            continue
        j = np.arange(rep.size) - np.repeat(np.cumsum(hops) - hops, hops)
        f = flow[rep]
        sign = np.where(minus[d][rep], -1, 1)
        chip = base[f] + ((cur[d][f] + sign * j) % k) * mult[d]
        for e in range(len(dims)):
            if e != d:
                chip = chip + (want[e][f] if e < d else cur[e][f]) * mult[e]
        ent.append(rep)
        links.append(t0 + (chip * nd + d) * 2 + minus[d][rep])
    lat = topo.step_s + (hops_total - 1) * topo.forward_hop_s
    pairs = (np.concatenate(ent), np.concatenate(links)) if ent else (np.zeros(0, np.int64),) * 2
    return nb[flow] * frac, lat, pairs


def step_pieces(topo, step, expander=None) -> Pieces:
    """The affine lower bounds of one step built for size 1 (bytes per unit size), dominated ones dropped."""
    nbytes, lat, ent_f, links = (expander or expand)(topo, step)
    if nbytes.size == 0:
        return ((0.0, 0.0),)
    link_ids, ent_l = np.unique(links, return_inverse=True)
    cap = topo.capacity(link_ids)
    if (cap <= 0).any():
        raise _no_bandwidth(topo, int(link_ids[np.argmax(cap <= 0)]))
    load = np.bincount(ent_l, weights=nbytes[ent_f], minlength=link_ids.size)
    first = np.full(link_ids.size, np.inf)
    np.minimum.at(first, ent_l, lat[ent_f])
    slowest = np.full(nbytes.size, np.inf)
    np.minimum.at(slowest, ent_f, cap[ent_l])
    a = np.concatenate([first, lat])
    b = np.concatenate([load / cap, nbytes / slowest])
    ua, inv = np.unique(a, return_inverse=True)
    top = np.full(ua.size, -1.0)
    np.maximum.at(top, inv, b)
    ua, top = ua[::-1], top[::-1]  # latest start first: keep a piece only if it is steeper than every later one
    before = np.maximum.accumulate(np.concatenate([[-1.0], top[:-1]]))
    keep = top > before
    return tuple(zip(ua[keep].tolist(), top[keep].tolist()))


_STEP_MEMO: dict = {}
_STEP_MEMO_MAX = 20000


def shared_step_pieces(topo, step) -> Pieces:
    """``step_pieces`` memoized on the step's flows with bytes normalised: the pieces scale with the bytes, and
    the reduce-scatter and all-gather halves of ring, torus-ring, rdh and hierarchical schedules move the
    same flows with other chunk sizes, so one group's all-reduce, reduce-scatter and all-gather share them."""
    keep = step.nbytes > 0
    if not keep.any():
        return ((0.0, 0.0),)
    nb = step.nbytes[keep]
    top = float(nb.max())
    key = (topo, step.src[keep].tobytes(), step.dst[keep].tobytes(), (nb / top).tobytes())
    hit = _STEP_MEMO.get(key)
    if hit is None:
        if len(_STEP_MEMO) >= _STEP_MEMO_MAX:
            _STEP_MEMO.clear()
        norm = type(step)(step.src[keep], step.dst[keep], nb / top, step.repeat, step.label)
        hit = _STEP_MEMO[key] = step_pieces(topo, norm)
    return tuple((a, b * top) for a, b in hit)


def schedule_pieces(topo, schedule) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, repeat) arrays, one row per step padded with zero pieces: time = sum_s r_s max_k (a + b size)."""
    steps = [shared_step_pieces(topo, s) for s in schedule.steps]
    width = max(len(p) for p in steps)
    a = np.zeros((len(steps), width))
    b = np.zeros((len(steps), width))
    for i, p in enumerate(steps):
        a[i, :len(p)] = [x for x, _ in p]
        b[i, :len(p)] = [y for _, y in p]
    return a, b, np.array([s.repeat for s in schedule.steps], dtype=float)


def algorithm_pieces(topo, op: str, rs, cfg, names: Sequence[str]) -> List[Tuple[str, np.ndarray, np.ndarray,
                                                                                  np.ndarray, float]]:
    """(algorithm, a, b, repeat, messages per rank) for every named algorithm that can run ``op`` on the rank
    set; sizes scale every step's bytes linearly, so one schedule at size 1 serves every size.  Pairwise
    all-to-all is left out where direct runs: the same bytes in one step never bound slower than in n-1."""
    from .algorithms import ALGORITHMS, NotApplicable
    out = []
    for name in names:
        if name == "pairwise" and any(n == "direct" for n, *_ in out):
            continue
        try:
            sched = ALGORITHMS[name](op, 1.0, rs, topo, cfg)
        except NotApplicable:
            continue
        out.append((name,) + schedule_pieces(topo, sched) + (float(sum(s.repeat * s.fanout for s in sched.steps)),))
    return out


def piece_times(cands, size: float, step_s: float = 0.0) -> List[Tuple[str, float]]:
    """(algorithm, seconds) at ``size`` of every ``algorithm_pieces`` candidate, ``step_s`` per message."""
    return [(c[0], float(np.max(c[1] + c[2] * size, axis=1) @ c[3]) + step_s * c[4]) for c in cands]


def best_of(cands, size: float) -> Tuple[str, float]:
    """The fastest (algorithm, seconds) at ``size`` among ``algorithm_pieces`` candidates."""
    return min(piece_times(cands, size), key=lambda x: x[1])


def _no_bandwidth(topo, link: int):
    from ..errors import ConfigError
    return ConfigError(f"link '{topo.link_name(link)}' of {topo.name} has no bandwidth figure",
                       rule="fabric-link", limit="> 0 bytes/s", value=0.0)
