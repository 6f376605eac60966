"""The cost model picks its rule from the opcode registry's cost class (ir/opcodes.py), never from
the opcode's spelling, and refuses an opcode the registry does not know.  Expected cycles are
worked out here from the documented figures (hardware.md section 11, cores.toml)."""
import pytest

from trnsim.errors import TrnsimError
from trnsim.hardware import get_chip, get_core
from trnsim.ir import opcodes
from trnsim.ir.opcodes import OpcodeSpec
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, schedule

LOC = SourceLoc("test.py", 1, "k")


def sb(tensor, n=512, dtype="bfloat16", width=2):
    return Region("sbuf", tensor, f"t{tensor}", 0, 128, 0, n * width, 128 * n, dtype, n * width)


def vec(op, engine="vector", n=512):
    return Instruction(0, engine, op, (sb(1, n), sb(2, n)), (sb(3, n),), 128, n, "bfloat16",
                       "bfloat16", (), LOC)


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(opcodes, "OPCODES", dict(opcodes.OPCODES))
    import trnsim.timing.costs as costs
    monkeypatch.setattr(costs, "OPCODES", opcodes.OPCODES)
    for name, cls in (("my_two_input", "two_input"), ("my_copy", "copy"),
                      ("my_copy_like", "copy_like"), ("my_stream", "stream")):
        opcodes.register(OpcodeSpec(name, ("vector", "scalar"), cls, 2, ("src", "dst")))
    return opcodes


def test_vector_cost_follows_the_cost_class(registry):
    core, chip = get_core("trn2"), get_chip("trn2")
    m = CostModel(core, chip)
    ns = 1e9 / core.clocks.vector_hz          # 0.96 GHz on v3
    # bf16, SBUF in and out, unit stride, N = 512 per partition; 60-cycle access bubble
    assert m.compute(vec("my_two_input")).occupancy_ns == pytest.approx((60 + 512 * 2 / 2) * ns)
    assert m.compute(vec("my_copy")).occupancy_ns == pytest.approx((60 + 512 / 4) * ns)
    assert m.compute(vec("my_copy_like")).occupancy_ns == pytest.approx((60 + 512 / 4) * ns)
    # no perf mode for the stream class: the 256-elements/cycle path = 2 per partition [ARCH3]
    assert m.compute(vec("my_stream")).occupancy_ns == pytest.approx((60 + 512 / 2) * ns)


def test_scalar_fast_path_is_for_the_copy_class_only(registry):
    core, chip = get_core("trn3"), get_chip("trn3")
    m = CostModel(core, chip)
    ns = 1e9 / core.clocks.scalar_hz           # 1.2 GHz on v4; bf16 tensor_copy/scalar 2x
    assert m.compute(vec("my_copy", "scalar")).occupancy_ns == pytest.approx((60 + 512 / 2) * ns)
    assert m.compute(vec("my_copy_like", "scalar")).occupancy_ns == pytest.approx((60 + 512) * ns)


def _trace(ins):
    t = Trace("trn2")
    t.append(ins)
    return t


@pytest.mark.parametrize("engine", ["vector", "scalar", "gpsimd", "sync", "tensor", "dma"])
def test_an_unregistered_opcode_is_an_error_on_every_engine_and_backend(engine):
    from trnsim.timing import native
    m = CostModel(get_core("trn2"), get_chip("trn2"))
    tr = _trace(vec("nc_teleport", engine))
    for backend in ("python", "native") if native.available() else ("python",):
        with pytest.raises(TrnsimError) as ei:
            schedule(tr, m, backend=backend)
        assert ei.value.rule == "unknown-opcode" and ei.value.value == "nc_teleport"


def test_fp8_takes_the_16bit_vector_path_where_the_core_data_says_so():
    """cores.toml: v4's 16-bit data path takes FP8 (ARCH4), v3's does not.  An FP8 tensor_copy of N=512
    per partition: v4 at the copy speedup (4x: 60 + 512/4 cycles), v3 at the 256-wide path for 'other data
    types' (2 per partition: 60 + 512/2) [ARCH3]."""
    def fp8_copy():
        r = lambda t: Region("sbuf", t, f"t{t}", 0, 128, 0, 512, 128 * 512, "float8_e4m3", 512)
        return Instruction(0, "vector", "tensor_copy", (r(1),), (r(2),), 128, 512, "float8_e4m3",
                           "float8_e4m3", (), LOC)
    for target, cycles in (("trn3", 60 + 512 / 4), ("trn2", 60 + 512 / 2)):
        core = get_core(target)
        ns = 1e9 / core.clocks.vector_hz
        assert CostModel(core, get_chip(target)).compute(fp8_copy()).occupancy_ns == pytest.approx(cycles * ns)
