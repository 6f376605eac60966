"""The opcode registry (trnsim/ir/opcodes.py): lookups, generation gates, and that the cost model
refuses an opcode it does not know."""
import pytest

from trnsim.errors import GenerationError, TrnsimError
from trnsim.ir import opcodes
from trnsim.ir.engines import ENGINES
from trnsim.ir.opcodes import OPCODES, OpcodeSpec, lookup, require_generation


def test_lookup_returns_the_table_row():
    mm = lookup("nc_matmul")
    assert mm == OpcodeSpec("nc_matmul", ("tensor",), "matmul", 2, ("stationary", "moving", "dst"))
    assert mm.engine == "tensor"
    assert lookup("nc_matmul_mx").min_generation == 4
    assert lookup("tensor_copy").engines[0] == "vector"          # the default engine comes first
    assert lookup("memset").engines == ("vector", "gpsimd", "scalar", "dma")
    assert lookup("dma_transpose").cost_class == "dma_transpose"


def test_every_row_names_known_engines_and_cost_classes():
    for spec in OPCODES.values():
        assert spec.engines and set(spec.engines) <= set(ENGINES), spec
        assert spec.cost_class in opcodes.COST_CLASSES, spec
        assert spec.min_generation in (2, 3, 4), spec


def test_unregistered_opcode_raises_with_rule_and_value():
    with pytest.raises(TrnsimError) as ei:
        lookup("nop")
    e = ei.value
    assert e.rule == "unknown-opcode" and e.value == "nop"
    assert e.limit == f"one of {len(OPCODES)} registered opcodes"
    assert isinstance(e, KeyError)


@pytest.mark.parametrize("name, gen, need", [
    ("nc_matmul_mx", 3, 4), ("quantize_mx", 2, 4), ("range_select", 2, 3),
    ("nonzero_with_count", 2, 3), ("core_barrier", 2, 3), ("sendrecv", 2, 3),
    ("matmul.double_row", 2, 3), ("nl.abs_max", 3, 4), ("mx", 3, 4),
    ("dtype.float8_e4m3fn", 3, 4), ("dma.hwdge", 2, 3),
])
def test_require_generation_raises_below_the_lowest_generation(name, gen, need):
    with pytest.raises(GenerationError) as ei:
        require_generation(name, gen, target=f"gen{gen}-target", where="k.py:3")
    e = ei.value
    assert e.rule == "generation"
    assert e.limit == f"gen{need}+" and e.value == f"gen{gen}"
    assert e.where == "k.py:3" and f"gen{gen}-target" in e.message
    require_generation(name, need)        # at the lowest generation: allowed
    require_generation(name, need + 1)    # and above


def test_require_generation_passes_on_ungated_opcodes():
    for name in ("nc_matmul", "dma_copy", "activation", "tensor_tensor"):
        require_generation(name, 2)


def test_require_generation_on_an_unknown_name_is_an_error():
    with pytest.raises(TrnsimError) as ei:
        require_generation("no_such_feature", 4)
    assert ei.value.rule == "unknown-opcode" and ei.value.value == "no_such_feature"


def test_register_feature_and_opcode(monkeypatch):
    monkeypatch.setattr(opcodes, "FEATURES", dict(opcodes.FEATURES))
    monkeypatch.setattr(opcodes, "OPCODES", dict(opcodes.OPCODES))
    opcodes.register_feature("matmul.quad_row", 5)
    with pytest.raises(GenerationError) as ei:
        require_generation("matmul.quad_row", 4)
    assert ei.value.limit == "gen5+" and ei.value.value == "gen4"
    opcodes.register(OpcodeSpec("nc_fancy", ("vector",), "stream", 3, ("src", "dst")))
    assert opcodes.lookup("nc_fancy").min_generation == 3
    with pytest.raises(TrnsimError) as ei:
        opcodes.register(OpcodeSpec("bad", ("warp",), "stream", 2, ()))
    assert ei.value.rule == "opcode-table"
    with pytest.raises(TrnsimError) as ei:
        opcodes.register(OpcodeSpec("bad", ("vector",), "teleport", 2, ()))
    assert ei.value.rule == "opcode-table" and ei.value.value == "teleport"
    with pytest.raises(TrnsimError) as ei:
        opcodes.register_feature("x", 0)
    assert ei.value.rule == "feature-table" and ei.value.value == 0
