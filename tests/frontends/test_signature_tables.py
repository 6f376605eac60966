"""The new-API ``nisa`` / ``nl`` wrappers generated from the signature tables: their parameters are
the documented NKI ones, every call rejects ``mask=`` and unknown keywords the same way, and each
has a short docstring."""
import inspect

import pytest

import trnsim.frontends.nki.isa as nisa
import trnsim.frontends.nki.language as nl
from trnsim.frontends.nki._checks import NkiValidationError
from trnsim.frontends.nki.isa.table import ROWS as ISA_ROWS
from trnsim.frontends.nki.language.table import ROWS as NL_ROWS

# Parameter lists of the NKI >= 0.2 API as the NKI ISA reference spells them (nki.isa.*.rst of
# the Neuron SDK, transcribed by hand; "name" is every instruction's optional instruction name).
DOCUMENTED = {
    "dma_copy": "dst src priority oob_mode dge_mode engine name",
    "tensor_copy": "dst src engine name",
    "tensor_tensor": "dst data1 data2 op engine name",
    "memset": "dst value engine name",
    "nc_matmul": "dst stationary moving is_stationary_onezero is_moving_onezero is_transpose "
                 "accumulate tile_position tile_size perf_mode name",
    "activation": "dst op data bias scale reduce_op reduce_res reduce_cmd name",
    "nc_transpose": "dst data engine name",
    "tensor_reduce": "dst op data axis negate keepdims name",
    "dma_transpose": "dst src axes priority dge_mode oob_mode name",
    "iota": "dst pattern offset channel_multiplier name",
    "reciprocal": "dst data name",
    "scalar_tensor_tensor": "dst data op0 operand0 op1 operand1 reverse0 reverse1 name",
    "quantize_mx": "dst src dst_scale name",
    "nc_matmul_mx": "dst stationary moving stationary_scale moving_scale tile_position tile_size "
                    "accumulate name",
    "nc_stream_shuffle": "dst src shuffle_mask name",
    "affine_select": "dst pattern channel_multiplier on_true_tile on_false_value cmp_op offset name",
    "tensor_scalar_reduce": "dst data op0 operand0 reduce_op reduce_res reverse0 reduce_cmd "
                            "reduce_init reduce_res_negate name",
    "dma_compute": "dst srcs reduce_op scales unique_indices oob_mode name",
    "max8": "dst src name",
    "activation_reduce": "dst op data reduce_op reduce_res bias scale name",
    "range_select": "dst on_true_tile comp_op0 comp_op1 bound0 bound1 reduce_cmd reduce_res "
                    "reduce_op range_start on_false_value name",
    "tensor_scalar_cumulative": "dst src op0 op1 imm0 imm1 reduce_cmd name",
}


def _params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "kw"]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_nisa_parameters_are_the_documented_ones(name):
    assert _params(getattr(nisa, name)) == DOCUMENTED[name].split()


def test_nisa_defaults_are_the_documented_enum_members():
    sig = inspect.signature(nisa.dma_copy).parameters
    assert sig["oob_mode"].default is nisa.oob_mode.error
    assert sig["dge_mode"].default is nisa.dge_mode.unknown
    assert sig["engine"].default is nisa.engine.unknown
    assert inspect.signature(nisa.affine_select).parameters["cmp_op"].default is nl.equal
    assert inspect.signature(nisa.core_barrier).parameters["engine"].default is nisa.engine.gpsimd


@pytest.mark.parametrize("row", ISA_ROWS + NL_ROWS, ids=lambda r: f"{r.prefix}.{r.name}")
def test_every_generated_call_rejects_mask_and_unknown_keywords(row):
    fn = getattr(nisa if row.prefix == "nisa" else nl, row.name)
    n = len([p for p in inspect.signature(fn).parameters.values()
             if p.default is inspect.Parameter.empty and p.kind == p.POSITIONAL_OR_KEYWORD])
    args = [object()] * n  # never inspected: the keyword check comes first
    with pytest.raises(NkiValidationError) as ei:
        fn(*args, mask=None)
    assert ei.value.rule == "new-api-mask" and f"{row.prefix}.{row.name}" in str(ei.value)
    with pytest.raises(NkiValidationError) as ei:
        fn(*args, bogus_keyword=1)
    assert ei.value.rule == "new-api-keyword" and ei.value.value == "bogus_keyword"


@pytest.mark.parametrize("row", ISA_ROWS + NL_ROWS, ids=lambda r: f"{r.prefix}.{r.name}")
def test_every_generated_call_has_a_short_docstring_and_its_own_name(row):
    fn = getattr(nisa if row.prefix == "nisa" else nl, row.name)
    assert fn.__name__ == row.name
    assert fn.__doc__ and 1 <= len(fn.__doc__.strip().splitlines()) <= 3


def test_one_row_per_call():
    for rows in (ISA_ROWS, NL_ROWS):
        names = [r.name for r in rows]
        assert len(names) == len(set(names))
