import math

import pytest

from trnsim.des import NORMAL, URGENT, EmptySchedule, EventQueue, Resource
from trnsim.errors import TrnsimError


def test_events_come_out_in_time_then_priority_then_fifo_order():
    q = EventQueue()
    q.schedule(5.0, "late")
    q.schedule(1.0, "b", NORMAL)
    q.schedule(1.0, "a", URGENT)
    q.schedule(1.0, "c", NORMAL)
    out = [q.step() for _ in range(4)]
    assert out == ["a", "b", "c", "late"]
    assert q.now == 5.0
    assert q.peek() == math.inf
    with pytest.raises(EmptySchedule):
        q.step()


def test_callbacks_may_schedule_more_and_run_stops_at_until():
    q = EventQueue()
    seen = []

    def tick(queue):
        seen.append(queue.now)
        queue.schedule(queue.now + 2.0, tick)

    q.schedule(0.0, tick)
    q.run(until=7.0)
    assert seen == [0.0, 2.0, 4.0, 6.0]     # hand-listed: every 2 time units up to 7
    assert q.now == 7.0 and q.peek() == 8.0


def test_past_times_are_rejected_with_the_value():
    q = EventQueue(start=3.0)
    with pytest.raises(TrnsimError, match="past"):
        q.schedule(1.0, "x")
    with pytest.raises(TrnsimError, match="past"):
        q.run(until=2.0)


def test_resource_is_fifo_and_counts_busy_time():
    r = Resource("link")
    assert r.acquire(0.0, 3.0) == 0.0
    assert r.acquire(1.0, 2.0) == 3.0      # waits for the first job
    assert r.acquire(10.0, 1.0) == 10.0    # idle gap
    assert r.busy == 6.0 and r.jobs == 3 and r.free_at == 11.0
