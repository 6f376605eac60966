"""``nki.collectives``: collectives between the ranks of a kernel, run with real values and timed.

The official NKI simulator does not implement these; trnsim does.  A rank is one logical
NeuronCore running the whole kernel (with LNC=2, two core threads per rank, core c of each rank
meeting core c of the others).  ``run_ranks(kernel, ranks, ...)`` launches ``ranks`` of them, each
with its own inputs (``per_rank``); a plain launch is a single rank (rank 0).  Semantics live in
``trnsim.nki.ops.collectives``; timing in ``trnsim.timing.collectives``.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, List, Optional, Sequence, Union

from ...errors import LaunchError
from ...nki import world as _world
from ...nki.core.context import maybe_current
from ...nki.ops import collectives as _ops
from .language import NKIObject
from .registers import VirtualRegister


class rg_partition_op(Enum):
    """How ``ReplicaGroup.from_partition_op`` maps a rank to its rank-list id."""
    bitwise_and = 0
    div = 1
    mod = 2


class ReplicaGroup(NKIObject):
    """The ranks a collective runs on, as a list of rank-lists (no rank in two of them); the
    collective runs independently within each rank-list."""

    def __init__(self, *groups: Any, **kwargs: Any):
        if len(groups) == 1 and isinstance(groups[0], (list, tuple)) and \
                all(isinstance(g, (list, tuple)) for g in groups[0]):
            groups = tuple(groups[0])
        self.groups = [list(g) if isinstance(g, (list, tuple)) else g for g in groups]
        super().__init__(**kwargs)

    @staticmethod
    def from_partition_op(world_size: int, op: "rg_partition_op", operand: int) -> "ReplicaGroup":
        """Ranks ``[0, world_size)`` with equal ``op(rank, operand)`` form one rank-list."""
        f = {rg_partition_op.bitwise_and: lambda r: r & operand,
             rg_partition_op.div: lambda r: r // operand,
             rg_partition_op.mod: lambda r: r % operand}[rg_partition_op(op)]
        lists: dict = {}
        for r in range(int(world_size)):
            lists.setdefault(f(r), []).append(r)
        return ReplicaGroup([lists[k] for k in sorted(lists)])

    def __eq__(self, other):
        return isinstance(other, ReplicaGroup) and self.groups == other.groups

    def __hash__(self):
        return hash(tuple(tuple(g) for g in self.groups))

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


def _groups(rg) -> List[List[int]]:
    if isinstance(rg, ReplicaGroup):
        return [[int(r) for r in g] for g in rg.groups]
    if isinstance(rg, (list, tuple)):
        return [[int(r) for r in g] for g in (rg if rg and isinstance(rg[0], (list, tuple))
                                               else [rg])]
    raise LaunchError(f"replica_group must be a ReplicaGroup, got {type(rg).__name__}",
                      rule="replica-group", value=type(rg).__name__)


def _reg(value: int) -> VirtualRegister:
    return VirtualRegister(int(value), frozen=True)


def rank_id(name=None):
    """This rank's id as a register (usable as ``.ap(scalar_offset=...)``); outside a kernel, 0."""
    if maybe_current() is None:
        return 0
    return _reg(_ops.rank_id())


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None) -> None:
    """``op`` (nl.add / nl.maximum / nl.minimum) of the sources of every rank of the rank-list."""
    _ops.all_reduce(srcs, dsts, _groups(replica_group), op)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """The sources of the rank-list concatenated along ``collective_dim`` in rank-list order."""
    _ops.all_gather(srcs, dsts, _groups(replica_group), collective_dim)


def reduce_scatter(srcs, dsts, replica_group, collective_dim, op, priority=None, name=None) -> None:
    """Chunk k (along ``collective_dim``) of the reduced sources goes to the k-th rank of the list."""
    _ops.reduce_scatter(srcs, dsts, _groups(replica_group), collective_dim, op)


def all_to_all(srcs, dsts, replica_group, collective_dim, priority=None, name=None) -> None:
    """Chunk j of rank i's source becomes chunk i of rank j's destination."""
    _ops.all_to_all(srcs, dsts, _groups(replica_group), collective_dim)


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None) -> None:
    """Send the source of each pair's source rank to its target rank."""
    _ops.collective_permute(srcs, dsts, source_target_pairs)


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group, channel_ids=(0,),
                                priority=None, name=None) -> None:
    """Ring step: send to the next rank of the rank-list, receive from the previous one."""
    _ops.collective_permute_implicit(srcs_by_channel, dsts_by_channel, _groups(replica_group),
                                     channel_ids)


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel,
                                       replica_group, op, channel_ids=(0,), priority=None,
                                       name=None) -> None:
    """Ring step sending ``op(srcs0, srcs1)``; receives the previous rank's into ``dsts``."""
    _ops.collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel,
                                            _groups(replica_group), op, channel_ids)


def collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group,
                                                           channel_id=0, name=None):
    """The rank whose data ring step ``iteration_id`` holds (a register): this rank at step 0."""
    return _reg(_ops.current_processing_rank_id(int(iteration_id), _groups(replica_group),
                                                channel_id))


def _unsupported(fname: str):
    from ...errors import UnsupportedError

    def f(*a, **kw):
        raise UnsupportedError(f"nki.collectives.{fname} is not simulated (run-time counts in a "
                               "metadata tensor)", rule="unsupported-api",
                               value=f"nki.collectives.{fname}")
    f.__name__ = fname
    f.__doc__ = f"``nki.collectives.{fname}``: not simulated (raises UnsupportedError)."
    return f


all_gather_v = _unsupported("all_gather_v")
all_to_all_v = _unsupported("all_to_all_v")


# -- launching several ranks ---------------------------------------------------------------------

@dataclass
class RanksResult:
    """What a multi-rank launch produced: per rank its outputs and its RunResult (traces)."""
    runs: list

    @property
    def outputs(self) -> list:
        """Each rank's kernel outputs, in rank order."""
        return [r.outputs for r in self.runs]

    def estimate(self, target: Optional[str] = None, hardware_file: Optional[str] = None) -> list:
        """The timing Estimate of every rank (collectives timed on the link figures)."""
        from ...timing.estimate import estimate_run
        return [estimate_run(r, target, hardware_file) for r in self.runs]

    def latency_us(self, target: Optional[str] = None, hardware_file: Optional[str] = None
                   ) -> float:
        """The slowest rank's latency in microseconds."""
        return max(e.latency_us for e in self.estimate(target, hardware_file))


def _tracked(fn: Callable, world: _world.World) -> Callable:
    """The kernel function, telling the world when each core thread of a rank starts and ends (a
    finished rank can never send again: what deadlock detection needs)."""
    import functools
    from ...source import SourceLoc
    code = getattr(fn, "__code__", None)
    loc = SourceLoc(code.co_filename, code.co_firstlineno, code.co_name) if code else None

    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        ctx = maybe_current()
        rank, core = int(ctx.shared.get("rank", 0)), ctx.core_id
        world.started(rank, core)
        try:
            return fn(*args, **kwargs)
        finally:
            world.finished(rank, core, loc)
    return kernel


def run_ranks(kernel, ranks: int, *args, per_rank: Union[None, Callable, Sequence] = None,
              options=None, **kwargs) -> RanksResult:
    """Launch ``kernel`` (``kernel[lnc]`` for LNC=2) on ``ranks`` ranks joined by collectives.
    ``per_rank(rank)`` (or ``per_rank[rank]``) gives each rank's arguments: a dict of keyword
    arguments or a tuple of positional ones, merged over the shared ``args`` / ``kwargs``."""
    __tracebackhide__ = True
    from .launch import _as_kernel
    from ...options import Options
    k = _as_kernel(kernel)
    # a fast-forwarded loop (timing-only runs) would skip the collectives of the iterations it
    # synthesizes, and the ranks would no longer meet: every iteration runs for real
    options = (options or Options.from_env()).replace(fast_forward="off")
    world = _world.World(int(ranks) if isinstance(ranks, int) and not isinstance(ranks, bool)
                         else 0, k.lnc)
    tracked = k._replace(fn=_tracked(k.fn, world))

    def one(r: int):
        a, kw = list(args), dict(kwargs)
        if per_rank is not None:
            got = per_rank(r) if callable(per_rank) else per_rank[r]
            if isinstance(got, dict):
                kw.update(got)
            else:
                a = list(got) + a[len(got):]
        return tracked.run(*a, options=options, **kw)

    return RanksResult(_world.launch_ranks(one, ranks, k.lnc, world))
