"""trnsim.api: load_kernel, make_inputs, bind_inputs, trace, time_kernel (what the CLI calls)."""
import textwrap

import ml_dtypes
import numpy as np
import pytest

import trnsim
from trnsim import api
from trnsim.errors import ConfigError, TrnsimError
from trnsim.hardware import get_chip, get_core

KERNEL_SRC = """
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def add_one(a, bias=1.0):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), bias))
        return out

    def copy(a):  # a plain legacy-API function, no decorator
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    """


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "my_kernels.py"
    p.write_text(textwrap.dedent(KERNEL_SRC))
    return str(p)


def test_exports():
    for name in ("trace", "trace_all", "load_kernel", "make_inputs", "time_kernel"):
        assert getattr(trnsim, name) is getattr(api, name)


def test_load_kernel_spec_and_path_func(kfile):
    k1 = api.load_kernel(f"{kfile}::add_one")
    k2 = api.load_kernel(kfile, "add_one")
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(k1(a), a + 1.0)
    np.testing.assert_array_equal(k2(a, bias=3.0), a + 3.0)


@pytest.mark.parametrize("spec,rule", [("no_separator.py", "kernel-spec"),
                                       ("/nonexistent/k.py::f", "kernel-file")])
def test_load_kernel_bad_spec(spec, rule):
    with pytest.raises(ConfigError) as ei:
        api.load_kernel(spec)
    assert ei.value.rule == rule


def test_load_kernel_unknown_name_lists_the_kernels(kfile):
    with pytest.raises(ConfigError) as ei:
        api.load_kernel(kfile, "nope")
    assert ei.value.rule == "kernel-name" and "add_one" in ei.value.limit and "copy" in ei.value.limit


def test_make_inputs_shapes_dtypes_literals(tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, c=np.full((2, 3), 7, dtype=np.int32), b=np.ones(4, dtype=np.float32))
    got = api.make_inputs(["a=128x512:bf16", "b=4x4", "i=8x2:int32", "n=3", "s='hello'",
                           "t=(1, 2)"], seed=5, npz=str(npz))
    assert got["a"].shape == (128, 512) and got["a"].dtype == ml_dtypes.bfloat16
    # the same seed gives the same standard-normal draws as numpy's generator
    ref = np.random.default_rng(5).standard_normal((128, 512), dtype=np.float32)
    np.testing.assert_array_equal(got["a"], ref.astype(ml_dtypes.bfloat16))
    assert got["i"].dtype == np.int32 and got["i"].min() >= 0 and got["i"].max() < 16
    assert got["n"] == 3 and got["s"] == "hello" and got["t"] == (1, 2)
    np.testing.assert_array_equal(got["b"], np.ones(4, dtype=np.float32))  # the npz wins
    np.testing.assert_array_equal(got["c"], np.full((2, 3), 7))


def test_make_inputs_timing_only_gives_zeros():
    got = api.make_inputs(["a=64x32:float32"], numerics=False)
    assert not got["a"].any() and got["a"].shape == (64, 32)


@pytest.mark.parametrize("spec,rule", [("noequals", "arg"), ("a=0x4", "arg-shape"),
                                       ("a=4x4:nope", "arg-dtype"), ("s=hello", "arg-value")])
def test_make_inputs_bad_specs(spec, rule):
    with pytest.raises(TrnsimError) as ei:
        api.make_inputs([spec])
    assert ei.value.rule == rule


def test_make_inputs_missing_npz():
    with pytest.raises(ConfigError) as ei:
        api.make_inputs([], npz="/nonexistent/in.npz")
    assert ei.value.rule == "inputs-file"


def test_bind_inputs_by_parameter_name(kfile):
    k = api.load_kernel(kfile, "add_one")
    args, kwargs = api.bind_inputs(k, {"arr_0": 1, "bias": 2.0})  # unnamed npz arrays go positionally
    assert args == [1] and kwargs == {"bias": 2.0}
    with pytest.raises(TrnsimError) as ei:  # a name the kernel does not declare is refused by name
        api.bind_inputs(k, {"x": 1, "bias": 2.0})
    assert ei.value.rule == "kernel-args" and ei.value.value == "x" and ei.value.limit == ["a", "bias"]
    with pytest.raises(TrnsimError) as ei:  # as is a missing one
        api.bind_inputs(k, {"bias": 2.0})
    assert ei.value.rule == "kernel-args" and "needs a" in ei.value.message


def test_trace_records_the_instructions(kfile):
    k = api.load_kernel(kfile, "copy")
    a = np.zeros((128, 256), dtype=np.float32)
    tr = trnsim.trace(k, a)
    assert [i.engine for i in tr] == ["dma", "dma"]
    assert len(trnsim.trace_all(k, a)) == 1


def test_time_kernel_against_a_hand_calculation(kfile):
    """A load and a store of 128 x 4096 fp32 (16 KiB per partition) on trn2, nothing else:
    latency = 2 x (fixed DMA cost + bytes / rate), rate as the DMA guide's figures give it."""
    k = api.load_kernel(kfile, "copy")
    a = np.random.default_rng(0).standard_normal((128, 4096)).astype(np.float32)
    est = api.time_kernel(k, a, target="gen3")  # any spelling of the target
    core, chip = get_core("trn2"), get_chip("trn2")
    d = core.timing.dma
    eff = dict(zip(d.efficiency_bytes, d.efficiency))[16384.0]
    eff = d.efficiency_floor + (1 - d.efficiency_floor) * eff
    rate = min(16 * d.engine_bytes_per_ns * eff, chip.hbm_bandwidth_bytes_per_s / 1e9 / chip.cores)
    one = d.fixed_latency_ns + a.nbytes / rate
    assert est.target == "trn2"
    assert est.latency_ns == pytest.approx(2 * one + core.timing.sync.cross_engine_ns, rel=1e-9)
    # timing-only skips the numbers, not the trace: the same latency
    fast = api.time_kernel(k, a, target="trn2", timing_only=True)
    assert fast.latency_ns == pytest.approx(est.latency_ns, rel=1e-12)
    # another generation re-times the same kernel with its own figures
    assert api.time_kernel(k, a, target="trn1").cores[0].spec.key == "v2"


def test_time_kernel_with_a_hardware_file(kfile, tmp_path):
    hw = tmp_path / "slow_dma.toml"
    hw.write_text(textwrap.dedent("""
        [cores.v3.timing.dma]
        fixed_latency_ns = { value = 10000.0, source = "choice: what-if slow descriptors" }
        """))
    k = api.load_kernel(kfile, "copy")
    a = np.zeros((128, 4096), dtype=np.float32)
    base = api.time_kernel(k, a, target="trn2")
    slow = api.time_kernel(k, a, target="trn2", hardware=str(hw))
    d = get_core("trn2").timing.dma
    # two DMAs in sequence, each paying the fixed cost once
    assert slow.latency_ns - base.latency_ns == pytest.approx(2 * (10000.0 - d.fixed_latency_ns))


def test_time_kernel_unknown_target_is_a_config_error(kfile):
    k = api.load_kernel(kfile, "copy")
    with pytest.raises(ConfigError) as ei:
        api.time_kernel(k, np.zeros((128, 8), np.float32), target="trn9")
    assert ei.value.rule == "target" and ei.value.value == "trn9"


def test_kernel_of_rejects_an_unknown_api(kfile):
    with pytest.raises(ConfigError) as ei:
        api.kernel_of(api.load_kernel(kfile, "copy"), api="newest")
    assert ei.value.rule == "kernel-api"


def test_op_costs_hands_the_reference_timer_to_the_model_layer(tmp_path):
    from trnsim.kernels import time_reference
    from trnsim.model.opcost import SimulatedOpCosts
    costs = api.op_costs("gen3", cache_dir=str(tmp_path))
    assert isinstance(costs, SimulatedOpCosts)
    assert costs.timer is time_reference and costs.target == "trn2"


def test_attention_impl_reaches_the_simulated_op_costs_and_needs_them():
    from trnsim import api
    from trnsim.errors import ConfigError
    costs = api._costs_for("simulated", "trn2.48xlarge", 2, None, "unfused")
    assert costs.attention_impl == "unfused" and costs.lnc == 2
    assert api._costs_for("simulated", "trn2.48xlarge", 2, None, None).attention_impl == "fused"
    with pytest.raises(ConfigError) as e:
        api.estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, attention_impl="unfused")
    assert e.value.rule == "attention-impl"
