"""The compiler's reordering within an engine's stream (issue 13; timing/reorder.py): hand-computed
timelines for independent chains, a WAR hazard that must not move, the window bound, a load
hoisted for an instruction issued early, the overrides, and ``window = 1`` = program order."""
import dataclasses
import sys

import numpy as np
import pytest

from trnsim.errors import ConfigError, HardwareFileError
from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.options import Options
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, native, schedule
from trnsim.timing.deps import dependencies_py
from trnsim.timing.scheduler import schedule_py

LOC = SourceLoc("reorder.py", 1, "k")
VEC_GHZ = 0.96          # trn2 Vector clock [ARCH3]
BUBBLE, HIDDEN, LAT = 60, 30, 100   # cycles: access bubble [ARCH2], half of it hidden when
#                                     queued (bubble_overlap 0.5), result latency [ARCH2 PERF]
RATE = 2                # fp32 elements/partition/cycle on v3: 256 for other data types [ARCH3]


def model(order="window", window=4, target="trn2"):
    core = get_core(target)
    t = core.timing
    core = dataclasses.replace(core, timing=dataclasses.replace(
        t, reorder=dataclasses.replace(t.reorder, window_instructions=window)))
    return CostModel(core, get_chip(target), engine_policy="fixed", stream_order=order)


def sbuf(tensor, free=512):
    return Region("sbuf", tensor, f"t{tensor}", 0, 128, 0, free * 4, 128 * free, "float32",
                  free * 4, False)


def copy(src, dst, free=512):
    """An fp32 Vector copy: 60 + free / 2 cycles on trn2 [ARCH2 ARCH3]."""
    return Instruction(0, "vector", "tensor_copy", (sbuf(src, free),), (sbuf(dst, free),), 128,
                       free, "float32", "float32", (), LOC, 0)


def load(dst, free=512, hbm=100):
    return Instruction(0, "dma", "dma_copy",
                       (Region("hbm", hbm, "h", 0, 128, 0, 128 * free * 4, 128 * free, "float32",
                               free * 4, False),),
                       (sbuf(dst, free),), 128, free, "float32", "float32", (), LOC, 0)


def trace(instrs):
    return Trace("trn2", [x._replace(index=k) for k, x in enumerate(instrs)])


def both(tr, m):
    """The Python reference, held to the C scheduler where it is built."""
    ref = schedule_py(tr, m)
    if native.available():
        got = schedule(tr, m, backend="native")
        for f in ("start", "end", "busy_end"):
            np.testing.assert_array_equal(getattr(got, f), getattr(ref, f), err_msg=f)
    return ref


def two_chains():
    """A1 -> A2 and B1 -> B2 on Vector, in program order A1, A2, B1, B2."""
    return trace([copy(1, 2), copy(2, 3), copy(11, 12), copy(12, 13)])


def test_two_independent_chains_by_hand():
    full, queued = BUBBLE + 512 / RATE, BUBBLE - HIDDEN + 512 / RATE      # 316 and 286 cycles
    # in order: A1 [0, 316); A2 waits for A1's result (416) on an idle engine: full bubble;
    # B1 queued behind A2; B2 waits for B1's result on an idle engine
    a2 = full + LAT
    b1 = a2 + full
    b2 = b1 + queued + LAT
    inorder = both(two_chains(), model("in_order"))
    assert inorder.start * VEC_GHZ == pytest.approx([0, a2, b1, b2])
    assert inorder.latency_ns * VEC_GHZ == pytest.approx(b2 + full + LAT)        # 1534 cycles
    # window 4: A2 is not ready when A1 ends (316 < 416), so the engine issues B1 (ready at 0,
    # queued: 286 cycles), then A2 (queued behind B1), then B2 (ready at 702, queued)
    tl = both(two_chains(), model("window", 4))
    b1w = full
    a2w = b1w + queued
    b2w = a2w + queued
    assert tl.start * VEC_GHZ == pytest.approx([0, a2w, b1w, b2w])
    assert tl.latency_ns * VEC_GHZ == pytest.approx(b2w + queued + LAT)         # 1274 cycles
    assert b2w + queued + LAT < b2 + full + LAT


def test_war_hazard_is_not_reordered():
    # B1 overwrites what A2 reads (tensor 2): B1 waits for A2 whatever the window
    war = trace([copy(1, 2), copy(2, 3), copy(11, 2)])
    assert sorted(dependencies_py(war, ("vector",))[2]) == [0, 1]   # WAW on A1, WAR on A2
    tl = both(war, model("window", 16))
    ref = both(war, model("in_order"))
    np.testing.assert_array_equal(tl.start, ref.start)
    assert tl.start[2] >= tl.end[1]
    # the same B1 writing elsewhere runs in A2's wait
    free = trace([copy(1, 2), copy(2, 3), copy(11, 4)])
    tl = both(free, model("window", 16))
    assert tl.start[2] < tl.start[1]


def test_window_bounds_how_far_ahead():
    # A1 -> A2; D1, D2 wait on A2; B is independent, three places after A2 in the stream
    tr = trace([copy(1, 2), copy(2, 3), copy(3, 4), copy(3, 5), copy(11, 12)])
    narrow = both(tr, model("window", 3))     # B is out of reach: program order
    wide = both(tr, model("window", 4))       # B runs in A2's wait
    assert narrow.start[4] > narrow.start[1]
    assert wide.start[4] * VEC_GHZ == pytest.approx(BUBBLE + 512 / RATE)
    assert wide.start[4] < wide.start[1]


def test_window_one_is_program_order():
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from test_native import random_trace
    for target in ("trn1", "trn2", "trn3"):
        tr = random_trace(7, 600, target)
        a = schedule_py(tr, model("in_order", 4, target))
        b = schedule_py(tr, model("window", 1, target))
        for f in ("start", "end", "busy_end"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        np.testing.assert_array_equal(a.engine_code, b.engine_code)


def test_load_is_hoisted_for_an_instruction_issued_early():
    # A2 waits on a long Scalar activation S; B needs a small load L that comes after A2 in
    # program order: the engine hoists L and runs B in A2's wait
    act = Instruction(0, "scalar", "activation", (sbuf(50, 16384),), (sbuf(2, 16384),), 128, 16384,
                      "float32", "float32", (), LOC, 0)
    a2 = Instruction(0, "vector", "tensor_tensor", (sbuf(2, 16384), sbuf(3)), (sbuf(4),), 128, 512,
                     "float32", "float32", (), LOC, 0)
    tr = trace([act, copy(1, 3), a2, load(12), copy(12, 13)])
    tl = both(tr, model("window", 4))
    ref = both(tr, model("in_order"))
    assert ref.start[4] > ref.start[2]                 # program order: B after A2
    assert tl.start[4] < tl.start[2]                   # issued early ...
    assert tl.start[4] == pytest.approx(tl.end[3])     # ... as soon as its hoisted load lands
    assert tl.end[3] < tl.end[0]                       # which is before S ends
    assert tl.start[3] == pytest.approx(ref.start[3])  # the load itself is not delayed
    assert tl.latency_ns <= ref.latency_ns


def test_loads_of_candidates_not_issued_do_not_overtake_an_older_ready_load():
    # A2 waits on a long Scalar activation S (16384 elements); D is a load older than the two
    # candidates' loads and ready at once (its reader is on Scalar, out of the Vector stream).
    # B1 needs an 8 MiB load L1 that cannot land before S ends, B2 a small load L2.  Both loads
    # would overtake D, so both candidates are deferred; only the first (B1) gets its load hoisted,
    # B1 still cannot start in A2's wait, and L2 stays behind D in program order.
    act = Instruction(0, "scalar", "activation", (sbuf(50, 16384),), (sbuf(2, 16384),), 128, 16384,
                      "float32", "float32", (), LOC, 0)
    use_d = Instruction(0, "scalar", "activation", (sbuf(20),), (sbuf(21),), 128, 512, "float32",
                        "float32", (), LOC, 0)
    tr = trace([act, copy(2, 4), load(20, 512, 100), load(30, 16384, 101), copy(30, 31, 16384),
                load(32, 512, 102), copy(32, 33), use_d])
    tl = both(tr, model("window", 4))
    ref = both(tr, model("in_order"))
    assert tl.start[1] == pytest.approx(ref.start[1])   # A2 when S ends: nothing issued before it
    assert tl.end[3] > tl.end[0]                        # L1 lands after S: B1 cannot go early
    assert tl.start[4] > tl.start[1] and tl.start[6] > tl.start[1]
    assert tl.start[3] < tl.start[2]                    # B1's load was hoisted (ahead of D) ...
    assert tl.start[5] >= tl.end[2]                     # ... B2's was not: L2 after D


def test_stream_order_overrides(monkeypatch, tmp_path):
    core, chip = get_core("trn2"), get_chip("trn2")
    assert CostModel(core, chip).stream_order == core.timing.reorder.policy == "window"
    assert CostModel(core, chip).reorder_window == core.timing.reorder.window_instructions
    monkeypatch.setenv("TRNSIM_STREAM_ORDER", "in_order")
    assert CostModel(core, chip).stream_order == "in_order"
    assert CostModel(core, chip).reorder_window == 1
    assert Options.from_env().stream_order == "in_order"
    assert CostModel(core, chip, stream_order="window").stream_order == "window"
    monkeypatch.delenv("TRNSIM_STREAM_ORDER")
    hw = tmp_path / "hw.toml"
    hw.write_text('[cores.v3.timing.reorder]\npolicy = { value = "in_order", source = "test" }\n'
                  'window_instructions = { value = 9, source = "test" }\n')
    from trnsim.hardware import load_catalog
    cat = load_catalog(str(hw))
    assert cat.cores["v3"].timing.reorder.window_instructions == 9
    assert CostModel(cat.cores["v3"], chip).stream_order == "in_order"
    with pytest.raises(ConfigError) as e:
        CostModel(core, chip, stream_order="out_of_order")
    assert e.value.rule == "stream-order" and e.value.value == "out_of_order"
    bad = tmp_path / "bad.toml"
    bad.write_text('[cores.v3.timing.reorder]\nwindow_instructions = { value = 0, source = "t" }\n')
    with pytest.raises(HardwareFileError) as e:
        load_catalog(str(bad))
    assert e.value.value == 0


@pytest.mark.parametrize("window", [2, 4, 16])
def test_random_traces_keep_every_dependency_and_the_window(window):
    """On random traces (test_native's generator): every instruction starts after all it depends
    on end, an engine runs one instruction at a time, and none starts before more than
    ``window - 1`` earlier instructions of its stream."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from test_native import random_trace
    for target in ("trn1", "trn2"):
        tr = random_trace(9, 700, target)
        m = model("window", window, target)
        tl = both(tr, m)
        deps = dependencies_py(tr, m.reorder_engines)
        for i, d in enumerate(deps):
            # a Tensor instruction waits for its Tensor predecessors' issue, not their results
            # (the PE writes PSUM in issue order: assign.IN_ORDER_ENGINE)
            assert all(tl.start[i] >= (tl.busy_end[p] if tl.engine[i] == tl.engine[p] == "tensor"
                                       else tl.end[p]) for p in d), i
        passed_most = 0
        for e in ("vector", "scalar", "gpsimd"):
            mine = [i for i, ins in enumerate(tr) if ins.engine == e and tl.engine[i] == e]
            spans = sorted((tl.start[i], tl.busy_end[i]) for i in mine)
            assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))
            for k, j in enumerate(mine):
                passed = sum(1 for i in mine[:k] if tl.start[i] > tl.start[j])
                assert passed <= window - 1
                passed_most = max(passed_most, passed)
        assert passed_most >= 1  # something was issued early
