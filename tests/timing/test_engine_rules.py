"""Vector / Scalar / GpSimd cost rules the public guides state, each against a figure worked out
by hand from the rule (hardware.md section 11, sources in brackets) and the core's clock."""
import pytest

from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.source import SourceLoc
from trnsim.timing import CostModel
from trnsim.timing.scheduler import schedule_py

LOC = SourceLoc("rules.py", 1, "k")
W = {"float32": 4, "bfloat16": 2, "int32": 4, "float8_e4m3": 1}


def model(target):
    return CostModel(get_core(target), get_chip(target), engine_policy="fixed")


def reg(tensor, free, dtype="float32", memory="sbuf", parts=128, contiguous=None):
    w = W[dtype]
    return Region(memory, tensor, f"t{tensor}", 0, parts, 0, free * w, parts * free, dtype,
                  contiguous if contiguous is not None else free * w, False)


def ins(engine, opcode, reads, writes, free, dtype="float32", attrs=(), parts=128):
    return Instruction(0, engine, opcode, tuple(reads), tuple(writes), parts, free, dtype, dtype,
                       attrs, LOC, 0)


def occ(m, i):
    return m.compute(i).occupancy_ns


def test_two_inputs_cost_twice_one_input_on_vector_fp32():
    # ~N cycles for one input, ~2N for two when N > 128 [ARCH2]; tensor_scalar ~2x cheaper than
    # tensor_tensor for FP32 [MAMBA]; plus the ~60-cycle access start-up [ARCH2]; 1.12 GHz (v2)
    m = model("trn1")
    n = 1024
    tt = ins("vector", "tensor_tensor", [reg(1, n), reg(2, n)], [reg(3, n)], n)
    ts = ins("vector", "tensor_scalar", [reg(1, n)], [reg(3, n)], n)
    assert occ(m, tt) == pytest.approx((60 + 2 * n) / 1.12)
    assert occ(m, ts) == pytest.approx((60 + n) / 1.12)
    # at N <= 128 the second input costs nothing extra
    small = ins("vector", "tensor_tensor", [reg(1, 128), reg(2, 128)], [reg(3, 128)], 128)
    assert occ(m, small) == pytest.approx((60 + 128) / 1.12)
    # the threshold is the data's (timing.vector/gpsimd.two_input_min_free): raised to 1024, a
    # 1024-element tensor_tensor takes one pass, 1025 elements two
    import dataclasses
    core = get_core("trn1")
    t = core.timing
    t = dataclasses.replace(t, vector=dataclasses.replace(t.vector, two_input_min_free=1024),
                            gpsimd=dataclasses.replace(t.gpsimd, two_input_min_free=1024))
    m2 = CostModel(dataclasses.replace(core, timing=t), get_chip("trn1"), engine_policy="fixed")
    assert occ(m2, tt) == pytest.approx((60 + n) / 1.12)
    big = ins("vector", "tensor_tensor", [reg(1, 1025), reg(2, 1025)], [reg(3, 1025)], 1025)
    assert occ(m2, big) == pytest.approx((60 + 2 * 1025) / 1.12)
    # GpSimd on v2: 1 fp32 element per cycle at 1.4 GHz [ARCH2]
    g = ins("gpsimd", "tensor_tensor", [reg(1, n), reg(2, n)], [reg(3, n)], n)
    assert occ(m, g) == pytest.approx((60 + 2 * n) / 1.4)
    assert occ(m2, g) == pytest.approx((60 + n) / 1.4)


def test_partition_count_does_not_change_the_cost():
    # <=128 lanes cost the same: cost grows with the free size only [ARCH2][PERF]
    m = model("trn1")
    full = ins("vector", "tensor_scalar", [reg(1, 512)], [reg(2, 512)], 512)
    part = ins("vector", "tensor_scalar", [reg(1, 512, parts=32)], [reg(2, 512, parts=32)], 512,
               parts=32)
    assert occ(m, full) == occ(m, part)


def test_dependent_one_element_scalar_chain_issues_every_264_cycles_v2():
    # "a chain of dependent 1-element ScalarE instructions issues every ~189 ns = 264 cycles" [PERF]
    m = model("trn1")
    chain = [ins("scalar", "activation", [reg(k, 1)], [reg(k + 1, 1)], 1) for k in range(1, 6)]
    tr = Trace("trn1", [x._replace(index=i) for i, x in enumerate(chain)])
    tl = schedule_py(tr, m)
    steps = [b - a for a, b in zip(tl.start[:-1], tl.start[1:])]
    assert steps == pytest.approx([264 / 1.4] * 4)   # 188.6 ns
    assert steps[0] == pytest.approx(189, abs=0.5)


def test_activation_reduce_adds_the_accumulator_read():
    # free-dim sum at no cost plus a ~64-cycle ActReadAccumulator [ARCH2]; 1.4 GHz ScalarE (v2)
    m = model("trn1")
    plain = ins("scalar", "activation", [reg(1, 512)], [reg(2, 512)], 512)
    red = plain._replace(opcode="activation_reduce", attrs=(("reduce_op", "add"),))
    assert occ(m, plain) == pytest.approx((60 + 512) / 1.4)
    assert occ(m, red) == pytest.approx((60 + 512 + 64) / 1.4)


def test_strided_access_halves_the_rate_on_v2_only():
    # innermost stride > 16 B halves the interface bandwidth on v2 [ARCH2]; v3 n/s (no penalty),
    # fp32 at 2 elements/partition/cycle there (256 for other data types [ARCH3])
    n = 512
    strided = ins("vector", "tensor_scalar", [reg(1, n, contiguous=4)], [reg(2, n)], n)
    assert occ(model("trn1"), strided) == pytest.approx((60 + 2 * n) / 1.12)
    assert occ(model("trn2"), strided) == pytest.approx((60 + n / 2) / 0.96)


def test_v3_vector_perf_modes():
    # BF16 tensor_copy/tensor_scalar SBUF->SBUF unit stride: 4x; one side in PSUM: 2x;
    # BF16 tensor_tensor with both inputs in SBUF: 2x [ARCH3]; 0.96 GHz VectorE (v3)
    m = model("trn2")
    n = 2048
    cp = ins("vector", "tensor_copy", [reg(1, n, "bfloat16")], [reg(2, n, "bfloat16")], n,
             "bfloat16")
    assert occ(m, cp) == pytest.approx((60 + n / 4) / 0.96)
    ps = cp._replace(reads=(reg(1, n, "bfloat16", memory="psum"),))
    assert occ(m, ps) == pytest.approx((60 + n / 2) / 0.96)
    tt = ins("vector", "tensor_tensor", [reg(1, n, "bfloat16"), reg(2, n, "bfloat16")],
             [reg(3, n, "bfloat16")], n, "bfloat16")
    assert occ(m, tt) == pytest.approx((60 + 2 * n / 2) / 0.96)
    f32 = cp._replace(reads=(reg(1, n),), writes=(reg(2, n),), dtype_in="float32",
                      dtype_out="float32")
    # perf modes are BF16/FP16 only: fp32 takes the 256-wide path, 2 per partition [ARCH3]
    assert occ(m, f32) == pytest.approx((60 + n / 2) / 0.96)


@pytest.mark.parametrize("target, ghz, rate", [
    ("trn1", 1.12, 1),   # v2: "128 input/output" elements/cycle [ARCH2]: 1 per partition
    ("trn2", 0.96, 2),   # v3: "256 input/output for other data types" [ARCH3]: 2 per partition
    ("trn3", 1.2, 2),    # v4: the same 256 for other data types [ARCH4]
])
def test_fp32_vector_rate_one_and_two_inputs(target, ghz, rate):
    # one input: 60-cycle access bubble + N / rate; two inputs share the input path, so ~2N / rate
    # when N > 128 [ARCH2]; at N = 2048: v2 2108 / 4156 cycles, v3 and v4 1084 / 2108
    m = model(target)
    n = 2048
    ts = ins("vector", "tensor_scalar", [reg(1, n)], [reg(2, n)], n)
    tt = ins("vector", "tensor_tensor", [reg(1, n), reg(2, n)], [reg(3, n)], n)
    one, two = {1: (2108, 4156), 2: (1084, 2108)}[rate]
    assert occ(m, ts) == pytest.approx(one / ghz)
    assert occ(m, tt) == pytest.approx(two / ghz)
    # int32 and (v3) FP8 are "other data types" too; mixed fp32 -> bf16 is not BF16/FP16 in/out
    i32 = ins("vector", "tensor_scalar", [reg(1, n, "int32")], [reg(2, n, "int32")], n, "int32")
    assert occ(m, i32) == pytest.approx(one / ghz)
    mixed = ins("vector", "tensor_copy", [reg(1, n)], [reg(2, n, "bfloat16")], n)
    assert occ(m, mixed) == pytest.approx(one / ghz)


@pytest.mark.parametrize("target, ghz", [("trn2", 0.96), ("trn3", 1.2)])
def test_bf16_perf_modes_stay_within_the_512_wide_path(target, ghz):
    # v3/v4: "512 BF16/FP16 input/output" elements/cycle = 4 per partition, reached by the 4x
    # copy perf mode (4x v2's 1 per partition) [ARCH3 ARCH4]; the 2x modes (PSUM side,
    # tensor_tensor) give 2 per partition, the same as the 256-wide path for other dtypes
    m = model(target)
    n = 2048
    cp = ins("vector", "tensor_copy", [reg(1, n, "bfloat16")], [reg(2, n, "bfloat16")], n,
             "bfloat16")
    assert occ(m, cp) == pytest.approx((60 + 2048 / 4) / ghz)        # 572 cycles: 4 per partition
    ps = cp._replace(reads=(reg(1, n, "bfloat16", memory="psum"),))
    assert occ(m, ps) == pytest.approx((60 + 2048 / 2) / ghz)        # 1084
    tt = ins("vector", "tensor_tensor", [reg(1, n, "bfloat16"), reg(2, n, "bfloat16")],
             [reg(3, n, "bfloat16")], n, "bfloat16")
    assert occ(m, tt) == pytest.approx((60 + 2 * 2048 / 2) / ghz)    # 2108: v2's 2N halved
    # a BF16 instruction outside perf mode (a reduction) is never slower than the fp32 path
    red = ins("vector", "tensor_reduce", [reg(1, n, "bfloat16")], [reg(2, 1, "bfloat16")], n,
              "bfloat16")
    assert occ(m, red) == pytest.approx((60 + 2048 / 2) / ghz)


def test_v4_scalar_bf16_copy_doubles():
    # v4 ScalarE: up to 2x for BF16/FP16 tensor_scalar/tensor_copy [ARCH4]; 1.2 GHz
    m = model("trn3")
    n = 2048
    cp = ins("scalar", "tensor_copy", [reg(1, n, "bfloat16")], [reg(2, n, "bfloat16")], n,
             "bfloat16")
    assert occ(m, cp) == pytest.approx((60 + n / 2) / 1.2)


def test_tiny_instruction_pays_the_minimum_ii():
    # minimum II ~64 cycles [SHARED]: a 1-element copy takes max(64, 60 + 1) cycles
    m = model("trn1")
    one = ins("gpsimd", "tensor_copy", [reg(1, 1)], [reg(2, 1)], 1)
    assert occ(m, one) == pytest.approx(64 / 1.4)
