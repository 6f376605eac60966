"""The event queue and a FIFO resource, the two pieces every simulator in trnsim builds on."""
from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..errors import ConfigError

URGENT = 0
NORMAL = 1


class EmptySchedule(Exception):
    """``step`` was called with nothing scheduled."""


class EventQueue:
    """A heap of ``(time, priority, seq, item)``: schedule, peek, step, run(until).

    An item is any object; when it is callable, ``run`` calls it with the queue (a callback that
    may schedule more).  Time is a unitless float; callers put the unit in their names (``t_ns``)."""

    __slots__ = ("now", "_heap", "_seq")

    def __init__(self, start: float = 0.0):
        self.now = float(start)
        self._heap: List[Tuple[float, int, int, Any]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, at: float, item: Any, priority: int = NORMAL) -> None:
        """Queue ``item`` at absolute time ``at`` (never before ``now``)."""
        if at < self.now:
            raise ConfigError("an event cannot be scheduled in the past", rule="des-past",
                              limit=f">= {self.now}", value=at)
        heapq.heappush(self._heap, (at, priority, next(self._seq), item))

    def peek(self) -> float:
        """Time of the next event, ``inf`` when none is queued."""
        return self._heap[0][0] if self._heap else math.inf

    def step(self) -> Any:
        """Pop the next event, advance ``now`` to it and return its item."""
        if not self._heap:
            raise EmptySchedule()
        at, _, _, item = heapq.heappop(self._heap)
        self.now = at
        return item

    def run(self, until: Optional[float] = None,
            handle: Optional[Callable[["EventQueue", Any], None]] = None) -> float:
        """Process events in order up to and including time ``until`` (all of them when None).

        Each item goes to ``handle(queue, item)``, or is called as ``item(queue)`` when no handler
        is given.  Returns the time of the last processed event."""
        if until is not None and until < self.now:
            raise ConfigError("run(until) lies in the past", rule="des-past",
                              limit=f">= {self.now}", value=until)
        heap = self._heap
        while heap and (until is None or heap[0][0] <= until):
            item = self.step()
            if handle is not None:
                handle(self, item)
            else:
                item(self)
        if until is not None:
            self.now = max(self.now, until)
        return self.now


class Resource:
    """A server that runs one job at a time in FIFO order (an engine, a DMA queue, a link).

    ``acquire(ready, duration)`` returns the job's start time: not before ``ready`` and not before the
    previous job ended.  ``busy`` accumulates occupied time for utilization."""

    __slots__ = ("name", "free_at", "busy", "jobs")

    def __init__(self, name: str = ""):
        self.name = name
        self.free_at = 0.0
        self.busy = 0.0
        self.jobs = 0

    def acquire(self, ready: float, duration: float) -> float:
        """Start time of a job ready at ``ready`` lasting ``duration``; the resource is held until
        it ends."""
        start = ready if ready > self.free_at else self.free_at
        self.free_at = start + duration
        self.busy += duration
        self.jobs += 1
        return start

    def earliest(self, ready: float) -> float:
        """When a job ready at ``ready`` could start (nothing is held): for jobs whose duration
        depends on their start time, followed by ``hold``."""
        return ready if ready > self.free_at else self.free_at

    def hold(self, start: float, duration: float) -> None:
        """Occupy the resource from ``start`` (at or after ``earliest``) for ``duration``."""
        self.free_at = start + duration
        self.busy += duration
        self.jobs += 1


def acquire_all(resources: Sequence[Resource], ready: float, duration: float) -> float:
    """Start a job that needs every resource at once (an engine and a shared port, a circuit over
    several links): the latest of ``ready`` and their free times; all are held until it ends."""
    start = ready
    for r in resources:
        if r.free_at > start:
            start = r.free_at
    for r in resources:
        r.hold(start, duration)
    return start
