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
