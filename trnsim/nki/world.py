"""The ranks of a multi-rank launch: a rendezvous for collectives, mailboxes for send/recv, and
deadlock detection.

A rank is one logical NeuronCore running the whole kernel (as ``nki.collectives`` defines ranks);
with LNC=2 each rank runs two core threads, and core ``c`` of one rank meets core ``c`` of its peers
(each core issues its own collectives).  Every rank runs in its own thread; a thread that waits
marks itself waiting, and when every thread of the world is waiting or finished while some still
wait, nothing can ever arrive: that is a deadlock, reported with each waiting rank's source line
and the state of the peer it waits for.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import KernelError, LaunchError
from ..source import describe

# Backstop only (deadlocks are detected when every thread waits): a rank blocked in an intra-rank
# core_barrier is invisible to the world, so a wait never lasts longer than this.
_TIMEOUT_S = 120.0
_POLL_S = 0.5


class CollectiveMismatchError(KernelError):
    """Ranks disagree on a collective: another operation, replica group, shape or dtype."""
    rule = "collective-mismatch"


class CollectiveDeadlockError(KernelError):
    """Every rank waits (or has finished) and some wait on data that can never arrive."""
    rule = "collective-deadlock"


class _PeerFailed(KernelError):
    rule = "peer-rank-failed"
    _trnsim_secondary = True


@dataclass
class Call:
    """One rank's side of a group collective: what it asks, with what data, from where."""
    kind: str
    members: Tuple[int, ...]        # the rank-list this rank belongs to
    groups: Tuple[Tuple[int, ...], ...]
    params: Tuple                   # (op, collective_dim, ...) that must agree across ranks
    shapes: Tuple                   # per tensor (src shape, dst shape, dtype) that must agree
    payload: Any                    # the values the combine function reads
    loc: Any = None
    combine: Optional[Callable] = field(default=None, repr=False)


def _full(loc) -> Optional[str]:
    return describe(loc) if loc is not None else None


def _where(loc) -> str:
    return f"{loc.file}:{loc.line}" if loc is not None else "?"


class World:
    """``ranks`` ranks of ``lnc`` core threads each, meeting in collectives."""

    def __init__(self, ranks: int, lnc: int = 1):
        self.ranks = ranks
        self.lnc = lnc
        self.cond = threading.Condition()
        self.state: Dict[Tuple[int, int], list] = {}   # (rank, core) -> [status, loc, what]
        self.seq: Dict[Tuple[int, int], int] = {}
        self.slots: Dict[Tuple[int, int], Dict[int, Call]] = {}
        self.results: Dict[Tuple, Any] = {}
        self.mail: Dict[Tuple, list] = {}
        self.failed: Optional[BaseException] = None
        self.deadlock: Optional[str] = None
        self.kernel_loc = None
        self.version = 0  # bumped by every send and result: waiters must re-check after it

    # -- thread states ------------------------------------------------------------------------
    def started(self, rank: int, core: int) -> None:
        """Rank ``rank``'s core ``core`` runs the kernel."""
        with self.cond:
            self.state[(rank, core)] = ["run", None, ""]

    def finished(self, rank: int, core: int, kernel_loc=None) -> None:
        """The core returned from the kernel (or failed): it will never send again.
        ``kernel_loc``: where the kernel is defined (named in deadlock reports)."""
        with self.cond:
            st = self.state.setdefault((rank, core), ["run", None, ""])
            if st[0] == "done":
                return
            st[0] = "done"
            if kernel_loc is not None:
                self.kernel_loc = kernel_loc
            self._check_stuck()
            self.cond.notify_all()

    def fail(self, e: BaseException) -> None:
        """Release every waiting thread after ``e`` (one rank's failure)."""
        with self.cond:
            if self.failed is None:
                self.failed = e
            self.cond.notify_all()

    def _describe(self, rank: int, core: int) -> str:
        st = self.state.get((rank, core))
        if st is None:
            return f"rank {rank}, which has not started"
        if st[0] == "done":
            k = f" (defined at {_where(self.kernel_loc)})" if self.kernel_loc else ""
            return f"rank {rank}, which finished the kernel{k}" + (
                f" (its last collective: {st[2]} at {_where(st[1])})" if st[1] else
                " without calling any collective")
        if st[0] == "wait":
            return f"rank {rank}, which waits in {st[2]} at {_where(st[1])}"
        return f"rank {rank}, which is running"

    def _check_stuck(self) -> None:
        """Called with the lock held: mark a deadlock when nothing can make progress."""
        if self.deadlock is not None or self.failed is not None:
            return
        if len(self.state) < self.ranks * self.lnc:
            return
        sts = [s[0] for s in self.state.values()]
        if "run" in sts or "wait" not in sts:
            return
        if any(s[0] == "wait" and s[4] != self.version for s in self.state.values()):
            return  # someone may have been sent something it has not looked at yet
        lines = []
        for (rank, core), st in sorted(self.state.items()):
            if st[0] == "wait":
                lines.append(f"rank {rank}{self._core_txt(core)} waits in {st[2]} at "
                             f"{_where(st[1])} for {st[3]()}")
        self.deadlock = "; ".join(lines)
        self.cond.notify_all()

    def _core_txt(self, core: int) -> str:
        return f" (LNC core {core})" if self.lnc > 1 else ""

    def _wait(self, rank: int, core: int, ready: Callable[[], Any], what: str, loc,
              waits_for: Callable[[], str]):
        """Block until ``ready()`` returns non-None (lock held); detects deadlocks."""
        st = self.state.setdefault((rank, core), ["run", None, ""])
        st[:] = ["wait", loc, what, waits_for, -1]
        try:
            waited = 0.0
            while True:
                got = ready()
                if got is not None:
                    return got
                st[4] = self.version
                if self.failed is not None:
                    raise _PeerFailed(f"another rank failed while rank {rank} waited in {what}",
                                      where=_full(loc))
                self._check_stuck()
                if self.deadlock is not None:
                    raise CollectiveDeadlockError(
                        f"deadlock: {self.deadlock}", rule="collective-deadlock",
                        limit="every receive needs a matching send; every rank of a replica group "
                              "must reach the collective",
                        value=f"rank {rank} in {what}", where=_full(loc))
                if waited >= _TIMEOUT_S:
                    raise CollectiveDeadlockError(
                        f"rank {rank} waited {_TIMEOUT_S:.0f} s in {what}: {waits_for()}",
                        rule="collective-deadlock", limit=f"{_TIMEOUT_S:.0f} s",
                        value=f"rank {rank} in {what}", where=_full(loc))
                self.cond.wait(_POLL_S)
                waited += _POLL_S
        finally:
            st[0:3] = ["run", loc, what]
            del st[3:]

    # -- group collectives --------------------------------------------------------------------
    def collective(self, rank: int, core: int, call: Call) -> Any:
        """Post this rank's side of a group collective; returns this rank's result once every rank
        of its rank-list has posted (the last to arrive combines them all)."""
        with self.cond:
            key = (core, self.seq.get((rank, core), 0))
            self.seq[(rank, core)] = key[1] + 1
            slot = self.slots.setdefault(key, {})
            for other, oc in slot.items():
                self._agree(rank, call, other, oc, key)
            slot[rank] = call
            if all(m in slot for m in call.members):
                out = call.combine([slot[m] for m in call.members])
                for m, r in zip(call.members, out):
                    self.results[(key, m)] = r
                    del slot[m]
                self.version += 1
                self.cond.notify_all()

            def waits_for() -> str:
                missing = [m for m in call.members if m not in slot and (key, m) not in self.results]
                return "; ".join(self._describe(m, core) for m in missing) or "the combine"

            return self._wait(rank, core, lambda: self.results.pop((key, rank), None),
                              f"{call.kind} #{key[1] + 1}", call.loc, waits_for)

    def _agree(self, rank: int, call: Call, other: int, oc: Call, key) -> None:
        nth = f"collective #{key[1] + 1} of each rank"
        mine = f"rank {rank} calls {call.kind}"
        theirs = f"rank {other} called {oc.kind}"
        bad = None
        if oc.kind != call.kind:
            bad = ("operation", oc.kind, call.kind)
        elif oc.groups != call.groups:
            bad = ("replica group", [list(g) for g in oc.groups], [list(g) for g in call.groups])
        elif oc.params != call.params:
            bad = ("arguments", oc.params, call.params)
        elif other in call.members and oc.shapes != call.shapes:
            bad = ("shapes/dtypes (src, dst, dtype per tensor)", oc.shapes, call.shapes)
        if bad is None:
            return
        e = CollectiveMismatchError(
            f"{mine} at {_where(call.loc)} but {theirs} at {_where(oc.loc)} ({nth}): the ranks "
            f"disagree on the {bad[0]}", rule="collective-mismatch", limit=f"{bad[1]} (rank {other})",
            value=f"{bad[2]} (rank {rank})", where=_full(call.loc),
            hint="every rank runs the same collectives in the same order with the same replica "
                 "group, shapes and dtypes")
        self.failed = self.failed or e
        self.cond.notify_all()
        raise e

    # -- point to point -----------------------------------------------------------------------
    def send(self, src: int, dst: int, channel: Tuple, value: Any, loc) -> None:
        """Post ``value`` from rank ``src`` to rank ``dst`` (buffered: never blocks)."""
        with self.cond:
            self.mail.setdefault((src, dst) + tuple(channel), []).append((value, loc))
            self.version += 1
            self.cond.notify_all()

    def recv(self, src: int, dst: int, core: int, channel: Tuple, what: str, loc) -> Any:
        """Take the next value rank ``src`` sent to ``dst`` on ``channel`` (waiting for it)."""
        key = (src, dst) + tuple(channel)
        with self.cond:
            def ready():
                q = self.mail.get(key)
                return q.pop(0)[0] if q else None

            return self._wait(dst, core, ready, what, loc,
                              lambda: f"a send from {self._describe(src, core)}")


def check_groups(groups: Sequence[Sequence[int]], world: int, rank: int, what: str, where_: str
                 ) -> Tuple[int, ...]:
    """The rank-list of ``rank`` in ``groups``; raises for ranks outside the world, overlapping or
    unequal rank-lists, and a rank that is in none."""
    seen: Dict[int, int] = {}
    sizes = {len(g) for g in groups}
    for gi, g in enumerate(groups):
        if not g:
            raise LaunchError(f"{what}: replica group {[list(x) for x in groups]} has an empty "
                              "rank-list", rule="replica-group", value=list(g), where=where_)
        for r in g:
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < world:
                raise LaunchError(f"{what}: replica group names rank {r!r} but the launch has "
                                  f"{world} rank(s)", rule="replica-group-rank",
                                  limit=f"ranks 0..{world - 1}", value=r, where=where_,
                                  hint="launch with run_ranks(kernel, ranks=N) for N ranks")
            if r in seen:
                raise LaunchError(f"{what}: rank {r} appears in two rank-lists of the replica "
                                  "group", rule="replica-group-overlap", value=r, where=where_)
            seen[r] = gi
    if len(sizes) > 1:
        raise LaunchError(f"{what}: the rank-lists of a replica group must have one size",
                          rule="replica-group-size", limit=f"one size", value=sorted(sizes),
                          where=where_)
    if rank not in seen:
        raise LaunchError(f"{what}: rank {rank} is in no rank-list of the replica group "
                          f"{[list(x) for x in groups]}", rule="replica-group-rank",
                          limit="every rank of the launch in one rank-list", value=rank,
                          where=where_)
    return tuple(groups[seen[rank]])


# -- the launch ---------------------------------------------------------------------------------

_launching = threading.local()


def launch_shared() -> dict:
    """The ``shared`` dict a launch starts from: this rank's world and rank id when the launch runs
    inside ``launch_ranks``, else empty (a single-rank launch)."""
    got = getattr(_launching, "slot", None)
    return dict(got) if got else {}


def launch_ranks(run_one: Callable[[int], Any], ranks: int, lnc: int = 1,
                 world: Optional[World] = None) -> List[Any]:
    """Run ``run_one(rank)`` for every rank in its own thread, the ranks joined by one World;
    returns each rank's result in rank order (the first failure is raised)."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise LaunchError("the rank count must be a positive integer", rule="ranks",
                          limit=">= 1", value=ranks)
    world = world or World(ranks, lnc)
    results: List[Any] = [None] * ranks
    errors: List[Optional[BaseException]] = [None] * ranks

    def body(r: int) -> None:
        _launching.slot = {"world": world, "rank": r}
        try:
            results[r] = run_one(r)
        except BaseException as e:  # keep it; release the other ranks
            errors[r] = e
            world.fail(e)
        finally:
            _launching.slot = None
            for c in range(lnc):
                world.finished(r, c)

    threads = [threading.Thread(target=body, args=(r,), name=f"trnsim-rank{r}")
               for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    primary = [e for e in errors if e is not None and not getattr(e, "_trnsim_secondary", False)]
    if primary or any(errors):
        raise (primary or [e for e in errors if e is not None])[0]
    return results
