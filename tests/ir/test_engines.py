"""The one engine table (trnsim/ir/engines.py): names, aliases, codes and labels."""
import pytest

from trnsim.errors import KernelError, TrnsimError
from trnsim.ir import engines


@pytest.mark.parametrize("alias, name", [
    ("PE", "tensor"), ("pe", "tensor"), ("Tensor", "tensor"), ("tensor_engine", "tensor"),
    ("DVE", "vector"), ("dve", "vector"), ("vector", "vector"),
    ("ACT", "scalar"), ("act", "scalar"), ("activation", "scalar"),
    ("POOL", "gpsimd"), ("Pool", "gpsimd"), ("gpsimd", "gpsimd"),
    ("SP", "sync"), ("sp", "sync"), ("sync", "sync"), ("dma", "dma"), (" DMA ", "dma"),
])
def test_aliases_resolve_to_the_canonical_name(alias, name):
    assert engines.canonical(alias) == name


def test_nisa_engine_codes_follow_the_new_api_enum():
    # nki.isa.engine: unknown=0, tensor=1, scalar=2, gpsimd=3, dma=4, vector=5, sync=6
    expected = {1: "tensor", 2: "scalar", 3: "gpsimd", 4: "dma", 5: "vector", 6: "sync"}
    assert {c: engines.canonical(c) for c in expected} == expected


def test_timing_codes_are_positions_in_track_order():
    assert engines.ENGINE_ORDER == ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")
    assert [engines.code(e) for e in engines.ENGINE_ORDER] == [0, 1, 2, 3, 4, 5]
    assert engines.COMPUTE_ENGINES == ("tensor", "vector", "scalar", "gpsimd", "sync")


def test_labels_and_profiler_tracks():
    assert engines.DISPLAY["tensor"] == "Tensor (PE)"
    assert engines.DISPLAY["gpsimd"] == "GpSimd (POOL)"
    assert engines.DISPLAY["dma"] == "DMA"
    assert engines.TRACK_NAME == {"tensor": "PE", "vector": "DVE", "scalar": "ACT",
                                  "gpsimd": "POOL", "sync": "SP", "dma": "DMA"}
    assert engines.LABEL["scalar"] == "Scalar"


@pytest.mark.parametrize("bad", ["warp", "", 0, 7, True, None, 2.0])
def test_unknown_engines_raise_a_named_error(bad):
    with pytest.raises(TrnsimError) as ei:
        engines.canonical(bad)
    e = ei.value
    assert e.rule == "engine" and e.value == repr(bad)
    assert e.limit == "tensor | vector | scalar | gpsimd | sync | dma"
    assert isinstance(e, KeyError)  # dict-like callers may catch KeyError


def test_the_caller_may_choose_the_error_class():
    with pytest.raises(KernelError) as ei:
        engines.canonical("warp", error=KernelError)
    assert ei.value.rule == "engine"


def test_check_accepts_only_canonical_names():
    assert engines.check("vector") == "vector"
    with pytest.raises(TrnsimError):
        engines.check("DVE")  # an alias is user input, never a trace's engine
