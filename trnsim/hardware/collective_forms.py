"""Closed-form collective costs (alpha-beta) on link figures: pure formulas, no state, no data files.

The one home of the ring formula: the fabric's fast path is tested against these (its flow simulator's
oracles) and the in-kernel collective timing (``timing/collectives.py``) computes with them, so a ring costs
the same in both.  It lives beside the catalog because both ``timing`` and ``fabric`` sit above ``hardware``.

``alpha`` is the latency of one step (s), ``bw`` the rate one rank's transfer gets (bytes/s per direction),
``channels`` how many directions of the ring carry data at once (2: both ways round).  Sizes follow
nccl-tests: S is the all-reduce buffer, the all-gather output, the reduce-scatter input, the all-to-all
bytes a rank sends."""
from __future__ import annotations

import math
from typing import Sequence, Tuple

# steps of a ring over n ranks; each step moves S/n (one pass of n-1 steps per reduce-scatter or all-gather)
_STEPS = {"all-reduce": lambda n: 2 * (n - 1), "all-gather": lambda n: n - 1,
          "reduce-scatter": lambda n: n - 1, "all-to-all": lambda n: n - 1}


def ring_steps(op: str, n: int) -> int:
    """Steps of a ring ``op`` over ``n`` ranks (1 for a point-to-point transfer)."""
    f = _STEPS.get(op)
    return f(n) if f else 1


def ring_collective_s(op: str, n: int, size: float, bw: float, alpha: float, channels: int = 1) -> Tuple[float, float]:
    """(latency s, transfer s) of a ring ``op``: steps x ``alpha``, and steps x chunk / (channels x bw) with
    chunk = S/n for the collectives that split the buffer, S for a point-to-point transfer."""
    k = ring_steps(op, n)
    chunk = size / n if op in _STEPS else size
    return k * alpha, k * chunk / (channels * bw)


def ring_all_reduce_s(n: int, size: float, bw: float, alpha: float, channels: int = 1) -> float:
    """Ring all-reduce: 2(n-1) steps of size/n bytes, split over ``channels`` directions."""
    return sum(ring_collective_s("all-reduce", n, size, bw, alpha, channels))


def ring_all_gather_s(n: int, size: float, bw: float, alpha: float, channels: int = 1) -> float:
    """Ring all-gather or reduce-scatter: n-1 steps of size/n bytes (size = the full buffer)."""
    return sum(ring_collective_s("all-gather", n, size, bw, alpha, channels))


def rdh_all_reduce_s(n: int, size: float, bw: float, alpha: float) -> float:
    """Recursive halving then doubling without contention: 2 log2 n steps moving 2(n-1)/n size in all."""
    return 2 * math.log2(n) * alpha + 2 * (n - 1) / n * size / bw


def switch_all_to_all_s(chips: int, ranks_per_chip: int, size: float, port_bw: float, alpha: float) -> float:
    """All-to-all on a non-blocking switch: each chip pushes its off-chip share through its own port."""
    n = chips * ranks_per_chip
    return alpha + ranks_per_chip * size * (n - ranks_per_chip) / n / port_bw


def torus_all_to_all_bound_s(dims: Sequence[int], ranks_per_chip: int, size: float, link_bw: float) -> float:
    """Bisection lower bound of an all-to-all on a torus: cut the largest (even) dim in half; the half's
    traffic to the other half crosses 2 x (chips / largest dim) links per direction."""
    chips = math.prod(dims)
    n = chips * ranks_per_chip
    half = n // 2
    crossing_bytes = half * half * size / n  # every rank of one half sends size/n to every rank of the other
    links = 2 * chips // max(dims)
    return crossing_bytes / (links * link_bw)


def core_to_core_bw(ranks: int, core_bw: float, pair_bw: float) -> float:
    """Capacity of a chip's core-to-core path when ``ranks`` of a group share the chip: each rank's DMA rate,
    bounded by the core-pair paths the ranks have between them (bytes/s per direction, all ranks together)."""
    k = max(1, int(ranks))
    return core_bw if k == 1 else min(k * core_bw, k * (k - 1) * pair_bw)
