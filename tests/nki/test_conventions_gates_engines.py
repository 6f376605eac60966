"""Generation gates (one rule, "generation", against the opcode registry), the nisa.nc_version of
a generation the hardware data adds later, engine names from the one engine table, and the two
compilers' conventions driving behaviour (no API-generation branches in the semantics)."""
import types

import numpy as np
import pytest

from trnsim.errors import GenerationError, IndexingError, KernelError
from trnsim.ir import opcodes
from trnsim.frontends.common import NcVersion
from trnsim.nki.core import gates
from trnsim.nki.core.conventions import PRESETS
from trnsim.nki.core.alloc import ndarray, sbuf, shared_hbm
from trnsim.nki.core import dtypes as dt
from trnsim.nki.harness import Kernel
from trnsim.nki.ops.base import Engine, engine_name
from trnsim.options import Options


def _ctx(generation: int):
    spec = types.SimpleNamespace(generation=generation, dtypes=())
    return types.SimpleNamespace(spec=spec, options=types.SimpleNamespace(target="what-if"))


@pytest.mark.parametrize("name,gen,need", [
    ("matmul.double_row", 2, 3),   # double_row is new in NeuronCore-v3 [ARCH3]
    ("mx", 3, 4),                  # microscaling is NeuronCore-v4 only [ARCH4]
    ("core_barrier", 2, 3),        # logical cores exist from Trn2
    ("nl.abs_max", 3, 4),
])


def test_a_gate_names_one_rule_with_the_generations(name, gen, need):
    with pytest.raises(GenerationError) as ei:
        gates.require(_ctx(gen), name)
    e = ei.value
    assert (e.rule, e.limit, e.value) == ("generation", f"gen{need}+", f"gen{gen}")
    gates.require(_ctx(need), name)  # the lowest generation that has it passes


def test_a_later_generation_passes_every_gate_without_code():
    for name in list(opcodes.OPCODES) + list(opcodes.FEATURES):
        gates.require(_ctx(5), name)


def test_nc_version_of_an_unknown_generation_is_a_comparable_pseudo_member():
    v = NcVersion(5)
    assert v >= NcVersion.gen4 and v > 4 and int(v) == 5 and v.name == "gen5"
    assert NcVersion(3) is NcVersion.gen3
    with pytest.raises(ValueError):
        NcVersion(0)


@pytest.mark.parametrize("arg,want", [
    ("PE", "tensor"), ("act", "scalar"), ("Pool", "gpsimd"), ("DVE", "vector"), ("sp", "sync"),
    ("gpsimd_engine", "gpsimd"), (1, "tensor"), (2, "scalar"), (3, "gpsimd"), (4, "dma"),
    (5, "vector"), (6, "sync"),  # nki.isa.engine numbering: tensor=1 ... sync=6
    (None, "dflt"), ("unknown", "dflt"), (0, "dflt"),
])


def test_engine_arguments_resolve_through_the_engine_table(arg, want):
    assert engine_name(arg, "dflt") == want


def test_engine_enum_keeps_the_nki_numbering_and_rejects_unknown_names():
    assert [(e.name, e.value) for e in Engine] == [
        ("unknown", 0), ("tensor", 1), ("scalar", 2), ("gpsimd", 3), ("dma", 4), ("vector", 5),
        ("sync", 6)]
    with pytest.raises(KernelError) as ei:
        engine_name("warp", "vector")
    assert ei.value.rule == "engine"


_SEEN = []


def _truthiness_kernel(a):
    out = ndarray((128, 4), dt.float32, shared_hbm, "out", conv=PRESETS["new"])
    t = ndarray((128, 4), dt.float32, sbuf, "t", conv=PRESETS["new"])
    _SEEN.append(bool(t))  # a presence test under one compiler, an error under the other
    from trnsim.nki.ops import dma
    dma.copy(t, a)
    dma.copy(out, t)
    return out


def test_conventions_not_api_branches_decide_tensor_truthiness():
    x = np.ones((128, 4), np.float32)
    opts = Options(target="trn2")
    res = Kernel(_truthiness_kernel, api=PRESETS["new"]).run(x, options=opts)
    np.testing.assert_array_equal(res.outputs, x)
    assert _SEEN == [True]
    with pytest.raises(IndexingError) as ei:
        Kernel(_truthiness_kernel, api=PRESETS["legacy"]).run(x, options=opts)
    assert ei.value.rule == "err_control_flow_condition_depending_on_arange"
