"""NeuronCore-v2 (trn1) Vector / Scalar / GpSimd cost rules against hand-calculated figures from
the v2 architecture guide [ARCH2] (clocks: Vector 1.12 GHz, Scalar and GpSimd 1.4 GHz)."""
import pytest

from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region
from trnsim.source import SourceLoc
from trnsim.timing import CostModel

LOC = SourceLoc("v2_rules.py", 1, "k")


def model():
    return CostModel(get_core("trn1"), get_chip("trn1"))


def sbuf(tensor, free, parts=128, contiguous=None):
    """An fp32 SBUF operand of ``free`` elements on each of ``parts`` partitions."""
    return Region("sbuf", tensor, f"t{tensor}", 0, parts, 0, free * 4, parts * free, "float32",
                  free * 4 if contiguous is None else contiguous, False)


def ins(engine, opcode, reads, writes, free):
    return Instruction(0, engine, opcode, tuple(reads), tuple(writes), 128, free, "float32",
                       "float32", (), LOC, 0)


def test_a_per_partition_scale_column_is_not_a_strided_read():
    """activation(exp, x[128, 512], scale=a[128, 1]) on ScalarE: the scale is one element per
    partition, read once, so the stride rule (innermost stride > 16 B halves the interface
    bandwidth [ARCH2]) does not apply: 60 (access start-up) + 512 x 1 cycles = 572 cycles at
    1.4 GHz = 408.571 ns.  Counted strided it would be 60 + 1024 = 1084 cycles (774.3 ns)."""
    c = model().compute(ins("scalar", "activation", [sbuf(1, 512), sbuf(2, 1)], [sbuf(3, 512)],
                            512))
    assert c.occupancy_ns == pytest.approx(572 / 1.4)


def test_a_truly_strided_read_still_halves_the_rate():
    """The same activation reading x with a 4-byte innermost run over 512 elements per partition
    (a column-strided view): 60 + 512 x 2 = 1084 cycles at 1.4 GHz = 774.286 ns."""
    c = model().compute(ins("scalar", "activation", [sbuf(1, 512, contiguous=4), sbuf(2, 1)],
                            [sbuf(3, 512)], 512))
    assert c.occupancy_ns == pytest.approx(1084 / 1.4)


def test_a_scan_with_a_one_column_initial_value_costs_two_inputs():
    """tensor_tensor_scan(a[128, 512], b[128, 512], initial=s[128, 1]) on VectorE: two input
    tensors of N = 512 > 128, ~2N cycles [ARCH2] plus the 60-cycle start-up: 1084 cycles at
    1.12 GHz = 967.857 ns (the initial column is not a strided read)."""
    c = model().compute(ins("vector", "tensor_tensor_scan", [sbuf(1, 512), sbuf(2, 512),
                                                            sbuf(4, 1)], [sbuf(3, 512)], 512))
    assert c.occupancy_ns == pytest.approx(1084 / 1.12)


# -- the rules on a schedule (both backends), trn1 --------------------------------------------

def _sched(instrs, backend):
    from trnsim.ir.trace import Trace
    from trnsim.timing import dependencies, schedule
    tr = Trace("trn1", [x._replace(index=k) for k, x in enumerate(instrs)])
    m = CostModel(get_core("trn1"), get_chip("trn1"), engine_policy="fixed",
                  stream_order="in_order")
    return schedule(tr, m, dependencies(tr, backend=backend), backend=backend)


BACKENDS = ["python", pytest.param("native", marks=pytest.mark.skipif(
    "not __import__('trnsim.timing.native', fromlist=['x']).available()"))]


def tt(a, b, out, free, engine="vector"):
    return ins(engine, "tensor_tensor", [sbuf(a, free), sbuf(b, free)], [sbuf(out, free)], free)


@pytest.mark.parametrize("backend", BACKENDS)
def test_queued_instruction_hides_half_its_access_bubble(backend):
    """Two independent tensor_tensor [128, 512] fp32 on VectorE: each costs 60 + 2 x 512 = 1084
    cycles (967.857 ns at 1.12 GHz); the second, queued behind the first, hides half of its
    60-cycle access start-up [ARCH2 "partly hidden by overlap"; bubble_overlap 0.5]: the engine
    is free again at 2 x 1084 - 30 = 2138 cycles = 1908.929 ns."""
    tl = _sched([tt(1, 2, 3, 512), tt(4, 5, 6, 512)], backend)
    assert tl.busy_end[0] == pytest.approx(1084 / 1.12)
    assert tl.busy_end[1] == pytest.approx(2138 / 1.12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dependent_instruction_waits_for_the_static_overhead(backend):
    """tensor_tensor then a tensor_tensor reading its result: the second starts when the first's
    result is ready, 100 cycles after it leaves the engine [ARCH2 "static instruction overhead
    of 100 engine cycles" when each instruction depends on the previous one]: 1184 cycles =
    1057.143 ns; nothing is hidden (the engine was idle, not queued)."""
    tl = _sched([tt(1, 2, 3, 512), tt(3, 5, 6, 512)], backend)
    assert tl.start[1] == pytest.approx(1184 / 1.12)
    assert tl.busy_end[1] - tl.start[1] == pytest.approx(1084 / 1.12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_and_gpsimd_never_use_sbuf_together_on_v2(backend):
    """Independent tensor_tensor [128, 512] fp32 on VectorE and on GpSimdE, both on SBUF: v2's
    shared port serializes them [ARCH2 "VectorE and GpSimdE cannot access SBUF in parallel"].
    Vector 1084 cycles at 1.12 GHz = 967.857 ns, then GpSimd 60 + 2 x 512 = 1084 cycles at 1.4 GHz
    = 774.286 ns: the GpSimd instruction ends at 1742.143 ns, not at 774.286."""
    tl = _sched([tt(1, 2, 3, 512), tt(4, 5, 6, 512, engine="gpsimd")], backend)
    assert tl.start[1] == pytest.approx(1084 / 1.12)
    assert tl.busy_end[1] == pytest.approx(1084 / 1.12 + 1084 / 1.4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_semaphore_wait_between_engines_costs_only_the_producer_latency(backend):
    """VectorE tensor_tensor then a ScalarE activation of its result: the consumer starts when
    the result is ready (1084 + 100 cycles at 1.12 GHz = 1057.143 ns) with no extra semaphore
    time (timing.sync.cross_engine_ns = 0: the docs give none between compute engines)."""
    act = ins("scalar", "activation", [sbuf(3, 512)], [sbuf(7, 512)], 512)
    tl = _sched([tt(1, 2, 3, 512), act], backend)
    assert tl.start[1] == pytest.approx(1184 / 1.12)


def test_mid_size_free_dims_pay_the_second_pass_only_above_128():
    """Two-input VectorE cost: ~2N cycles only when N > 128 [ARCH2]; at N = 128 one pass:
    60 + 128 = 188 cycles (167.857 ns); at N = 129, 60 + 258 = 318 cycles (283.929 ns); at N = 2
    the 64-cycle minimum II: 60 + 2 = 62 < 64, so 64 cycles (57.143 ns)."""
    m = model()
    assert m.compute(tt(1, 2, 3, 128)).occupancy_ns == pytest.approx(188 / 1.12)
    assert m.compute(tt(1, 2, 3, 129)).occupancy_ns == pytest.approx(318 / 1.12)
    assert m.compute(tt(1, 2, 3, 2)).occupancy_ns == pytest.approx(64 / 1.12)


def _mm(stat, mov, out, k=128, n=512, dtype="bfloat16"):
    w = 2 if dtype == "bfloat16" else 4
    s = Region("sbuf", stat, f"t{stat}", 0, k, 0, 128 * w, k * 128, dtype, 128 * w, False)
    m = Region("sbuf", mov, f"t{mov}", 0, k, 0, n * w, k * n, dtype, n * w, False)
    o = Region("psum", out, f"t{out}", 0, 128, 0, n * 4, 128 * n, "float32", n * 4, False)
    return Instruction(0, "tensor", "nc_matmul", (s, m), (o,), k, n, dtype, "float32",
                       (("contraction", k), ("stationary_free", 128), ("moving_free", n)), LOC, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmuls_accumulating_into_one_bank_issue_back_to_back(backend):
    """Four bf16 matmuls [128 x 128] x [128 x 512] accumulating into one PSUM bank, each with a
    new stationary: issue interval max(N, 64) = 512 PE cycles (the 32-cycle stationary load
    hides behind it) at 2.8 GHz = 182.857 ns.  The PE writes PSUM in issue order, so the four
    run back to back [ARCH2 "full tiles issued back-to-back reach peak"]: the last leaves the
    engine at 4 x 512 = 2048 cycles = 731.429 ns (one result latency apart, 128 cycles more
    each, it would be 1097.143 ns)."""
    tl = _sched([_mm(2 * k + 1, 2 * k + 2, 99) for k in range(4)], backend)
    assert list(tl.start) == pytest.approx([k * 512 / 2.8 for k in range(4)])
    assert tl.busy_end[3] == pytest.approx(2048 / 2.8)
