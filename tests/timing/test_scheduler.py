"""The timing model on hand-built traces, against arithmetic worked out here from the documented
figures (hardware.md section 11), not against the model's own earlier output."""
import math

import pytest

from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, dependencies, schedule

LOC = SourceLoc("test.py", 1, "k")


def reg(memory, tensor, parts=128, start=0, stop=2048, elements=None, dtype="float32",
        contiguous=None):
    width = {"float32": 4, "bfloat16": 2}[dtype]
    if elements is None:
        elements = (stop - start) // width * (parts if memory != "hbm" else 1)
    return Region(memory, tensor, f"t{tensor}", 0, parts, start, stop, elements, dtype,
                  contiguous or (stop - start))


def ins(i, engine, opcode, reads=(), writes=(), parts=128, free=512, din="float32",
        dout="float32", attrs=()):
    return Instruction(i, engine, opcode, tuple(reads), tuple(writes), parts, free, din, dout,
                       tuple(attrs), LOC)


def model(target):
    return CostModel(get_core(target), get_chip(target))


def trace(instrs, target="trn1"):
    t = Trace(target=target)
    for x in instrs:
        t.append(x)
    return t


def test_one_dma_time_is_fixed_cost_plus_bytes_over_sixteen_engines():
    core = get_core("trn2")
    d = core.timing.dma
    # HBM (128 rows x 16 KiB contiguous) -> SBUF (128 partitions x 16 KiB)
    per_part = 16384
    src = reg("hbm", 1, parts=1, start=0, stop=128 * per_part, elements=128 * 4096,
              contiguous=per_part)
    dst = reg("sbuf", 2, start=0, stop=per_part)
    tl = schedule(trace([ins(0, "dma", "dma_copy", [src], [dst], free=4096)], "trn2"),
                  model("trn2"))
    # efficiency at 16 KiB: the FIG-DMA point for 16384 bytes
    eff = dict(zip(d.efficiency_bytes, d.efficiency))[16384.0]
    engines = 128 // d.partitions_per_engine                       # 16
    rate = engines * d.engine_bytes_per_ns * eff                   # B/ns
    hbm_share = get_chip("trn2").hbm_bandwidth_bytes_per_s / 1e9 / get_chip("trn2").cores
    rate = min(rate, hbm_share)
    expect = d.fixed_latency_ns + 128 * per_part / rate
    assert tl.end[0] == pytest.approx(expect, rel=1e-9)
    assert len(tl.dma_parts) == engines


def test_one_matmul_issue_interval_is_max_of_moving_free_and_init_latency():
    core = get_core("trn1")
    tt = core.timing.tensor
    ghz = core.clocks.tensor_hz / 1e9
    st = reg("sbuf", 1, stop=256, dtype="bfloat16")
    mv = reg("sbuf", 2, stop=1024, dtype="bfloat16")
    out = reg("psum", 3, stop=2048)
    mm = ins(0, "tensor", "nc_matmul", [st, mv], [out], free=512, din="bfloat16",
             attrs=(("moving_free", 512), ("stationary_free", 128), ("contraction", 128)))
    tl = schedule(trace([mm]), model("trn1"))
    occ = max(512, tt.mm_init_cycles) / ghz                         # 182.86 ns at 2.8 GHz
    assert tl.busy_end[0] - tl.start[0] == pytest.approx(occ)
    assert tl.end[0] == pytest.approx(occ + tt.result_latency_cycles / ghz)
    # a small moving tile is floored at MM_INIT_LATENCY = 64 cycles
    mm_small = ins(0, "tensor", "nc_matmul", [st, mv], [out], free=16, din="bfloat16",
                   attrs=(("moving_free", 16), ("stationary_free", 128), ("contraction", 128)))
    tl2 = schedule(trace([mm_small]), model("trn1"))
    assert tl2.busy_end[0] - tl2.start[0] == pytest.approx(tt.mm_init_cycles / ghz)
    # fp32 operands take fp32_passes (4x) the time of bf16 ones
    mm32 = ins(0, "tensor", "nc_matmul", [st, mv], [out], free=512, din="float32",
               attrs=(("moving_free", 512), ("stationary_free", 128), ("contraction", 128)))
    tl3 = schedule(trace([mm32]), model("trn1"))
    assert tl3.busy_end[0] - tl3.start[0] == pytest.approx(4 * occ)


def test_dependent_chain_across_engines_runs_back_to_back():
    core = get_core("trn1")
    hbm_in = reg("hbm", 1, parts=1, stop=128 * 2048, elements=128 * 512, contiguous=2048)
    sb = reg("sbuf", 2, stop=2048)
    ps = reg("psum", 3, stop=2048)
    sb2 = reg("sbuf", 4, stop=2048)
    hbm_out = reg("hbm", 5, parts=1, stop=128 * 2048, elements=128 * 512, contiguous=2048)
    t = trace([
        ins(0, "dma", "dma_copy", [hbm_in], [sb]),
        ins(1, "tensor", "nc_matmul", [sb, sb], [ps], din="float32",
            attrs=(("moving_free", 512), ("stationary_free", 128), ("contraction", 128))),
        ins(2, "vector", "tensor_copy", [ps], [sb2]),
        ins(3, "dma", "dma_copy", [sb2], [hbm_out]),
    ])
    deps = dependencies(t)
    assert deps == [(), (0,), (1,), (2,)]
    tl = schedule(t, model("trn1"), deps)
    for i in (1, 2, 3):
        # each starts when its producer's result is ready (DMA adds its fixed latency)
        fixed = core.timing.dma.fixed_latency_ns if i == 3 else 0.0
        assert tl.start[i] == pytest.approx(tl.end[i - 1] + fixed)
    # the vector copy reads PSUM fp32: ~N cycles plus the access bubble, at the vector clock
    v = core.timing.vector
    occ = max(v.min_ii_cycles, v.access_bubble_cycles + 512 / v.elems_per_cycle) / \
        (core.clocks.vector_hz / 1e9)
    assert tl.busy_end[2] - tl.start[2] == pytest.approx(occ)


def test_independent_streams_overlap_and_same_engine_serializes():
    a1, a2 = reg("sbuf", 1, stop=2048), reg("sbuf", 2, stop=2048)
    b1, b2 = reg("sbuf", 3, stop=2048), reg("sbuf", 4, stop=2048)
    t = trace([
        ins(0, "vector", "tensor_copy", [a1], [a2]),
        ins(1, "scalar", "activation", [b1], [b2], attrs=(("func", "exp"),)),
        ins(2, "vector", "tensor_copy", [b1], [reg("sbuf", 5, stop=2048)]),
    ])
    tl = schedule(t, model("trn1"))
    assert tl.start[0] == 0.0 and tl.start[1] == 0.0          # different engines, no deps
    assert tl.start[2] == pytest.approx(tl.busy_end[0])      # same engine: after the first
    assert max(tl.end) < (tl.end[0] - tl.start[0]) + (tl.end[1] - tl.start[1]) + \
        (tl.end[2] - tl.start[2])                            # overlap, not a sum


def test_write_after_read_waits_for_the_reader():
    buf = reg("sbuf", 1, stop=2048)
    t = trace([
        ins(0, "vector", "tensor_copy", [buf], [reg("sbuf", 2, stop=2048)]),
        ins(1, "scalar", "activation", [reg("sbuf", 3, stop=2048)], [buf],
            attrs=(("func", "exp"),)),
    ])
    assert dependencies(t) == [(), (0,)]


def test_v2_scalar_dependent_chain_matches_the_documented_264_cycles():
    core = get_core("trn1")
    s = core.timing.scalar
    x = reg("sbuf", 1, parts=1, stop=4, elements=1)
    t = trace([ins(i, "scalar", "activation", [x], [x], parts=1, free=1,
                   attrs=(("func", "exp"),)) for i in range(10)])
    tl = schedule(t, model("trn1"))
    period = tl.start[5] - tl.start[4]
    # PERF: a chain of dependent 1-element ScalarE instructions issues every ~189 ns (264 cycles)
    assert period * core.clocks.scalar_hz / 1e9 == pytest.approx(264.0)
    assert period == pytest.approx((s.min_ii_cycles + s.latency_cycles) / 1.4)


def test_trn2_tensor_engine_warm_up_throttle():
    core = get_core("trn2")
    tt = core.timing.tensor
    st = reg("sbuf", 1, stop=256, dtype="bfloat16")
    mv = reg("sbuf", 2, stop=1024, dtype="bfloat16")
    mms = [ins(i, "tensor", "nc_matmul", [st, mv], [reg("psum", 10 + (i % 8), stop=2048)],
               din="bfloat16",
               attrs=(("moving_free", 512), ("stationary_free", 128), ("contraction", 128)))
           for i in range(200)]
    tl = schedule(trace(mms, "trn2"), model("trn2"))
    occ = 512 / (core.clocks.tensor_hz / 1e9)
    # first instruction at the 50% cap: twice the nominal time
    assert tl.busy_end[0] - tl.start[0] == pytest.approx(occ / tt.throttle_start)
    # after the ramp (3 us) back to nominal
    late = [i for i in range(200) if tl.start[i] > tt.throttle_ramp_ns + 1]
    assert late and tl.busy_end[late[0]] - tl.start[late[0]] == pytest.approx(occ)
    # the cap at an instruction's start applies to the whole instruction:
    # t_{i+1} = t_i + occ / (c + (1 - c) * min(1, t_i / R))
    c, R = tt.throttle_start, tt.throttle_ramp_ns
    t = 0.0
    for _ in range(200):
        t += occ / (c + (1 - c) * min(1.0, t / R))
    assert tl.busy_end[199] == pytest.approx(t)
    # and a continuous ramp (work = integral of the cap over time) costs R (1 - c) / 2 extra;
    # freezing the cap per instruction can only cost more, by less than one instruction
    extra = tl.busy_end[199] - 200 * occ
    assert R * (1 - c) / 2 <= extra < R * (1 - c) / 2 + occ
    # trn1 has no throttle
    tl1 = schedule(trace(mms, "trn1"), model("trn1"))
    occ1 = 512 / (get_core("trn1").clocks.tensor_hz / 1e9)
    assert tl1.busy_end[199] == pytest.approx(200 * occ1)
