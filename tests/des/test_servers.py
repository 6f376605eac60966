"""des servers beyond the FIFO Resource: holding several at once, and the gap-filling server.
Expected start times are worked out by hand in the comments."""
import pytest

from trnsim.des import GapResource, Resource, acquire_all
from trnsim.errors import TrnsimError


def test_earliest_then_hold_equals_acquire():
    r = Resource()
    assert r.earliest(2.0) == 2.0
    r.hold(2.0, 3.0)                       # busy [2, 5)
    assert r.earliest(1.0) == 5.0 and r.earliest(7.0) == 7.0
    assert (r.free_at, r.busy, r.jobs) == (5.0, 3.0, 1)


def test_acquire_all_waits_for_the_latest_and_holds_every_resource():
    eng, port = Resource("engine"), Resource("port")
    eng.acquire(0.0, 4.0)                  # engine free at 4
    port.acquire(0.0, 6.0)                 # port free at 6
    assert acquire_all([eng, port], 1.0, 2.0) == 6.0   # max(1, 4, 6)
    assert eng.free_at == port.free_at == 8.0
    assert acquire_all([eng], 10.0, 1.0) == 10.0       # idle: starts when ready
    assert acquire_all([], 3.0, 1.0) == 3.0            # nothing to wait for


def test_gap_resource_fills_the_earliest_gap_that_fits():
    g = GapResource()
    assert g.place(0.0, 2.0) == 0.0        # [0, 2)
    assert g.place(5.0, 1.0) == 5.0        # [0, 2) [5, 6)
    assert g.place(1.0, 2.0) == 2.0        # gap [2, 5) fits 2 -> [0, 4) merged with [0, 2)
    assert (g.starts, g.ends) == ([0.0, 5.0], [4.0, 6.0])
    assert g.place(0.0, 1.0) == 4.0        # gap [4, 5) fits exactly -> everything merges
    assert (g.starts, g.ends) == ([0.0], [6.0])
    assert g.place(0.0, 3.0) == 6.0        # no gap left: after the end, merged
    assert (g.starts, g.ends) == ([0.0], [9.0])


def test_gap_resource_skips_gaps_too_small():
    g = GapResource()
    g.place(0.0, 1.0)                      # [0, 1)
    g.place(2.0, 1.0)                      # [2, 3): gap of 1
    g.place(5.0, 1.0)                      # [5, 6): gap of 2
    assert g.place(0.5, 1.5) == 3.0        # 1.5 does not fit [1, 2), fits [3, 5)
    assert (g.starts, g.ends) == ([0.0, 2.0, 5.0], [1.0, 4.5, 6.0])


def test_gap_window_limits_the_look_back():
    full, windowed = GapResource(), GapResource(window=2)
    for g in (full, windowed):
        for k in range(4):                 # [0,1) [2,3) [4,5) [6,7): gaps of 1 between
            g.place(2.0 * k, 1.0)
    assert full.place(0.0, 1.0) == 1.0     # the first gap
    # window 2: only the gaps around the last two intervals ([4,5) [6,7)) are searched, i.e. from
    # the end of the interval before them (3) on: the gap [3, 4)
    assert windowed.place(0.0, 1.0) == 3.0


def test_copy_is_independent():
    g = GapResource(window=8)
    g.place(0.0, 1.0)
    h = g.copy()
    h.place(0.0, 1.0)
    assert g.ends == [1.0] and h.ends == [2.0] and h.window == 8


def test_window_must_be_positive():
    with pytest.raises(TrnsimError) as ei:
        GapResource(window=0)
    assert ei.value.rule == "des-window" and ei.value.value == 0
