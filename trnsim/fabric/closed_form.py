"""Closed forms (alpha-beta) for collectives: a fast path and the oracles the flow simulator is tested against.

``alpha`` is the latency of one step (s), ``bw`` the bandwidth one rank's transfer gets (bytes/s per
direction), ``channels`` how many directions of the ring carry data at once (2: both ways round)."""
from __future__ import annotations

import math
from typing import Sequence


def ring_all_reduce_s(n: int, size: float, bw: float, alpha: float, channels: int = 1) -> float:
    """Ring all-reduce: 2(n-1) steps of size/n bytes, split over ``channels`` directions."""
    return 2 * (n - 1) * (alpha + size / n / channels / bw)


def ring_all_gather_s(n: int, size: float, bw: float, alpha: float, channels: int = 1) -> float:
    """Ring all-gather or reduce-scatter: n-1 steps of size/n bytes (size = the full buffer)."""
    return (n - 1) * (alpha + size / n / channels / bw)


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
