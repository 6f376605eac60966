"""The scheduler's rule objects (timing/rules.py) on hand-worked cases."""
import pytest

from trnsim.ir.trace import Instruction, Region
from trnsim.source import SourceLoc
from trnsim.timing.rules import DmaQueues, SharedPorts, TensorThrottle

LOC = SourceLoc("test.py", 1, "k")


def test_dma_queues_round_robin_and_gap_filling():
    q = DmaQueues(4)
    assert q.place(0, 0.0, 10.0, 2) == (0.0, 10.0)   # queues 0, 1: [0, 10)
    # queues 2, 3 idle -> start 0; queues 0, 1 busy until 10 -> start 10; last end 15
    assert q.place(1, 0.0, 5.0, 4) == (0.0, 15.0)
    # the pointer is back at queue 2 (2 + 4 = 6 = 2 mod 4); queue 2 is busy [0, 5): start at 5
    assert q.place(2, 0.0, 3.0, 1) == (5.0, 8.0)
    # queue 3 is busy [0, 5) only: a transfer ready at 1 lasting 2 waits for 5
    assert q.place(3, 1.0, 2.0, 1) == (5.0, 7.0)
    parts = q.parts()
    assert list(parts) == [(0, 0, 0.0, 10.0), (0, 1, 0.0, 10.0),
                           (1, 2, 0.0, 5.0), (1, 3, 0.0, 5.0), (1, 0, 10.0, 15.0),
                           (1, 1, 10.0, 15.0), (2, 2, 5.0, 8.0), (3, 3, 5.0, 7.0)]
    assert parts.queue_busy_ns() == {0: 15.0, 1: 15.0, 2: 8.0, 3: 7.0}


def test_dma_queue_gap_is_used_by_a_transfer_ready_early():
    q = DmaQueues(1)
    q.place(0, 0.0, 2.0, 1)                 # [0, 2)
    q.place(1, 10.0, 2.0, 1)                # [10, 12): leaves the gap [2, 10)
    assert q.place(2, 1.0, 4.0, 1) == (2.0, 6.0)


def _ins(engine, memories):
    regs = tuple(Region(m, 1, "t", 0, 128, 0, 512, 128 * 128, "float32", 512) for m in memories)
    return Instruction(0, engine, "tensor_copy", regs[:1], regs[1:], 128, 128, "float32",
                       "float32", (), LOC)


def test_shared_ports_of_v2():
    p = SharedPorts(True, True)
    assert p.needed("vector", _ins("vector", ["sbuf", "psum"])) == (p.sbuf, p.psum)
    assert p.needed("scalar", _ins("scalar", ["psum", "sbuf"])) == (p.psum,)  # ACT: PSUM port only
    assert p.needed("gpsimd", _ins("gpsimd", ["sbuf", "sbuf"])) == (p.sbuf,)
    assert p.needed("gpsimd", _ins("gpsimd", ["psum", "psum"])) == ()  # POOL has no PSUM port
    off = SharedPorts(False, False)
    assert not off.active and off.needed("vector", _ins("vector", ["sbuf", "psum"])) == ()


def test_tensor_throttle_ramps_and_re_engages():
    th = TensorThrottle(start=0.5, ramp_ns=100.0, window_ns=50.0, min_util=0.5)
    assert th.factor(0.0) == 0.5            # starts throttled; the ramp starts now
    th.record(0.0, 40.0)
    assert th.factor(40.0) == pytest.approx(0.5 + 0.5 * 40 / 100)  # busy 40 of 50: ramp goes on
    # at 200 the window [150, 200) saw no work: utilization 0 < 50% -> throttled again
    assert th.factor(200.0) == 0.5
    assert TensorThrottle(1.0, 100.0, 50.0, 0.5).factor(0.0) == 1.0  # trn1: no throttle
