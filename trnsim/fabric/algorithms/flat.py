"""Flat algorithms over one ordered list of ranks: ring, recursive halving/doubling, direct (mesh), pairwise.

Sizes follow nccl-tests: S is the all-reduce buffer, the all-gather output, the reduce-scatter input,
the all-to-all total per rank, the broadcast / send-recv message."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..config import FabricConfig
from ..schedule import RankSet, Schedule, Step, chip_step, ring_order
from ..topology import Topology
from .base import NotApplicable, WrongOp, is_pow2, log2


def _flat_ok(rs: RankSet, cfg: FabricConfig, name: str) -> None:
    if rs.chips() > cfg.max_flat_chips:
        raise NotApplicable(f"{name}: a flat schedule over {rs.chips()} chips exceeds "
                            f"simulator.max_flat_chips = {cfg.max_flat_chips}")


def _ring_step(topo: Topology, cfg: FabricConfig, order: np.ndarray, chunk: float, repeat: int,
               label: str) -> Step:
    """Every rank sends ``chunk`` to its ring successor, split over the ring's channels (both directions)."""
    ch = 2 if cfg.ring_channels >= 2 else 1
    src = np.concatenate([order] * ch)
    dst = np.concatenate([np.roll(order, -1), np.roll(order, 1)][:ch])
    return chip_step(topo, src, dst, chunk / ch, repeat, label)


def ring(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """Ring along a Hamiltonian cycle of the ranks: n-1 steps per reduce-scatter or all-gather pass."""
    _flat_ok(rs, cfg, "ring")
    order = ring_order(rs, rs.all_ranks())
    n = order.size
    if op == "all-reduce":
        steps = (_ring_step(topo, cfg, order, size / n, 2 * (n - 1), "reduce-scatter + all-gather"),)
    elif op in ("all-gather", "reduce-scatter"):
        steps = (_ring_step(topo, cfg, order, size / n, n - 1, op),)
    elif op == "broadcast":  # scatter from the root, then a ring all-gather (van de Geijn)
        root = order[:1].repeat(n - 1)
        steps = (chip_step(topo, root, order[1:], size / n, 1, "scatter"),
                 _ring_step(topo, cfg, order, size / n, n - 1, "all-gather"))
    else:
        raise WrongOp(f"ring does not run {op}")
    return Schedule(op, "ring", steps)


def rdh(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """Recursive halving (reduce-scatter) and doubling (all-gather); a binomial tree for broadcast."""
    _flat_ok(rs, cfg, "rdh")
    n = rs.n
    if not is_pow2(n):
        raise NotApplicable(f"rdh needs a power-of-two rank count, got {n}")
    order = ring_order(rs, rs.all_ranks())
    idx = np.arange(n)
    steps = []
    if op in ("all-reduce", "reduce-scatter"):
        for j in range(log2(n)):
            partner = idx ^ (n >> (j + 1))
            steps.append(chip_step(topo, order, order[partner], size / 2 ** (j + 1),
                                   2 if op == "all-reduce" else 1, f"halving {j}"))
    elif op == "all-gather":
        for j in range(log2(n)):
            steps.append(chip_step(topo, order, order[idx ^ (1 << j)], size / n * 2 ** j, 1, f"doubling {j}"))
    elif op == "broadcast":
        for j in range(log2(n)):
            stride = n >> j
            senders = idx[idx % stride == 0]
            steps.append(chip_step(topo, order[senders], order[senders + stride // 2], size, 1, f"tree {j}"))
    else:
        raise WrongOp(f"rdh does not run {op}")
    return Schedule(op, "rdh", tuple(steps))


def direct(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """Every rank writes straight to every other (the runtime's Mesh): one step per pass."""
    _flat_ok(rs, cfg, "direct")
    ranks = rs.all_ranks()
    n = ranks.size
    if op == "send-recv":  # each rank sends the whole message to the next rank of the list
        return Schedule(op, "direct", (chip_step(topo, ranks, np.roll(ranks, -1), size, 1, op),))
    if op == "broadcast":
        order = ring_order(rs, ranks)
        step = chip_step(topo, order[:1].repeat(n - 1), order[1:], size, 1, op)
        return Schedule(op, "direct", (replace(step, fanout=n - 1),))
    chips, counts = np.unique(ranks // topo.cores_per_chip, return_counts=True)
    if chips.size ** 2 > cfg.max_flows_per_step:
        raise NotApplicable(f"direct: {chips.size ** 2} chip pairs exceed simulator.max_flows_per_step "
                            f"= {cfg.max_flows_per_step}")
    # rank pairs summed per chip pair: c_a * c_b, and c_a * (c_a - 1) on the diagonal
    pairs = np.outer(counts, counts).astype(float) - np.diag(counts)
    src = np.repeat(chips, chips.size)
    dst = np.tile(chips, chips.size)
    nbytes = pairs.ravel() * (size / n)
    keep = nbytes > 0
    repeat = 2 if op == "all-reduce" else 1
    if op not in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        raise WrongOp(f"direct does not run {op}")
    return Schedule(op, "direct", (Step(src[keep], dst[keep], nbytes[keep], repeat, op, fanout=n - 1),))


def pairwise(op: str, size: float, rs: RankSet, topo: Topology, cfg: FabricConfig) -> Schedule:
    """All-to-all in n-1 shifted exchanges: at step s rank i sends its block to rank i+s."""
    if op != "all-to-all":
        raise WrongOp(f"pairwise runs only all-to-all, not {op}")
    if rs.n > cfg.max_pairwise_ranks:
        raise NotApplicable(f"pairwise: {rs.n} ranks exceed simulator.max_pairwise_ranks = "
                            f"{cfg.max_pairwise_ranks}")
    order = ring_order(rs, rs.all_ranks())
    n = order.size
    steps = tuple(chip_step(topo, order, np.roll(order, -s), size / n, 1, f"shift {s}") for s in range(1, n))
    return Schedule(op, "pairwise", steps)
