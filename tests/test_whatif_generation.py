"""A generation is data: a what-if NeuronCore defined only in a user's hardware file runs kernels
(numerics against numpy) and their timing (against a hand calculation), with no code change."""
import os
import textwrap

import ml_dtypes
import numpy as np
import pytest

import trnsim
from trnsim.errors import ConfigError, HardwareFileError
from trnsim.hardware import load_catalog
from trnsim.options import Options, canonical_target

# A projected next generation, "as the Trainium4 announcements claim" (re:Invent 2025: 3x the FP8
# performance and 4x the memory bandwidth of Trainium3).  A PROJECTION, labelled as such below.
WHATIF = """
    [sources.tags]
    TRN4-ANN = "AWS re:Invent 2025 Trainium4 preview (3x FP8, 4x memory bandwidth vs Trainium3)"

    [cores.v5]
    base = "v4"
    name = "NeuronCore-v5 (projection)"
    generation = 5
    nc_version = "gen5"
    targets = { value = ["trn4-proj", "gen5", "v5"], source = "choice: projection" }

    [cores.v5.timing.tensor]
    fp8_speedup = { value = 3.0, source = "TRN4-ANN", note = "PROJECTION: 3 x v4's 1.0" }

    [cores.v5.timing.dma]
    engine_bytes_per_ns = { value = 132.0, source = "choice: PROJECTION, 4 x v4's 33 B/ns" }

    [chips.trn4-proj]
    base = "trn3"
    name = "Trainium4 (projection)"
    core = "v5"
    target = "trn4-proj"
    hbm_bandwidth_bytes_per_s = { value = 1.96e13, source = "TRN4-ANN", note = "PROJECTION: 4 x 4.9 TB/s" }
"""

EXAMPLE = os.path.join(os.path.dirname(trnsim.__file__), "hardware", "examples",
                       "trn4-projection.toml")


@pytest.fixture
def whatif(tmp_path):
    p = tmp_path / "trn4_whatif.toml"
    p.write_text(textwrap.dedent(WHATIF))
    return str(p)


def _double_kernel():
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def double(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), 2.0))
        return out
    return double


def _fp8_matmul_kernel():
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki.jit
    def mm(a, b):  # a [K=128, M=128], b [K=128, N=512] -> a.T @ b
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nisa.nc_matmul(nl.load(a), nl.load(b))))
        return out
    return mm


def test_the_whatif_generation_is_in_the_catalog(whatif):
    cat = load_catalog(whatif)
    v4, v5 = cat.cores["v4"], cat.cores["v5"]
    assert (v5.generation, v5.nc_version, v5.target) == (5, "gen5", "trn4-proj")
    assert v5.timing.tensor.fp8_speedup == 3 * v4.timing.tensor.fp8_speedup
    assert v5.timing.dma.engine_bytes_per_ns == 4 * v4.timing.dma.engine_bytes_per_ns
    assert cat.chips["trn4-proj"].hbm_bandwidth_bytes_per_s == 4 * cat.chips["trn3"].hbm_bandwidth_bytes_per_s
    # what the file does not say is v4's / trn3's figure, and says where it came from
    assert v5.sbuf == v4.sbuf and v5.clocks == v4.clocks
    assert "inherited from v4" in v5.source("clocks.tensor_hz")
    assert cat.chips["trn4-proj"].hbm_bytes == cat.chips["trn3"].hbm_bytes
    assert "PROJECTION" in cat.chips["trn4-proj"].source("hbm_bandwidth_bytes_per_s")
    # every spelling of the new generation resolves, through the file or the environment
    for name in ("trn4-proj", "gen5", "V5", "trn4-proj.48xlarge"):
        assert canonical_target(name, whatif) == "trn4-proj"
        assert Options(target=name, hardware_file=whatif).target == "trn4-proj"
    with pytest.raises(ConfigError) as ei:
        Options(target="trn4-proj")  # not in the built-in catalog
    assert ei.value.rule == "target" and "trn3" in str(ei.value.limit)


def test_dma_bound_kernel_latency_shrinks_with_the_bandwidth(whatif, monkeypatch):
    a = np.random.default_rng(0).standard_normal((128, 8192)).astype(np.float32)
    k = _double_kernel()
    est4 = trnsim.time_kernel(k, a, target="trn3")
    monkeypatch.setenv("TRNSIM_HARDWARE", whatif)  # the environment route
    monkeypatch.setenv("TRNSIM_TARGET", "gen5")
    out = k(a)  # a plain kernel call, as a user's test makes it
    est5 = trnsim.time_kernel(k, a)
    monkeypatch.delenv("TRNSIM_HARDWARE")
    monkeypatch.delenv("TRNSIM_TARGET")
    assert est5.target == "trn4-proj" and est5.cores[0].spec.key == "v5"
    np.testing.assert_array_equal(out, a * 2.0)  # x2 is exact in fp32
    for est in (est4, est5):
        assert [i.engine for i in est.cores[0].trace] == ["dma", "vector", "dma"]
    # hand calculation: one load and one store of B bytes, each at
    # rate = min(16 engines x engine rate x efficiency(32 KiB chunks), HBM bandwidth / 8 cores)
    B = a.nbytes
    cat4, cat5 = load_catalog(), load_catalog(whatif)

    def rate(cat, core, chip):
        d = cat.cores[core].timing.dma
        eff = d.efficiency_floor + (1 - d.efficiency_floor) * d.efficiency[-1]  # 32 KiB: last point
        assert d.efficiency_bytes[-1] <= 8192 * 4
        engines = 128 // d.partitions_per_engine
        hbm = cat.chips[chip].hbm_bandwidth_bytes_per_s / 1e9 / cat.chips[chip].cores
        return min(engines * d.engine_bytes_per_ns * eff, hbm)

    r4, r5 = rate(cat4, "v4", "trn3"), rate(cat5, "v5", "trn4-proj")
    assert r4 == pytest.approx(16 * 33.0)        # v4 is DMA-engine bound (528 < 612.5 B/ns)
    assert r5 == pytest.approx(16 * 132.0)       # 2112 < 2450 B/ns: 4x
    saved = 2 * B * (1 / r4 - 1 / r5)            # = 11,915.6 ns for 4 MiB each way
    assert est4.latency_ns - est5.latency_ns == pytest.approx(saved, rel=1e-9)
    # the Vector work between them is the same generation's figure (inherited), unchanged
    assert est4.cores[0].engine_busy_ns()["vector"] == pytest.approx(
        est5.cores[0].engine_busy_ns()["vector"], rel=1e-12)


def test_fp8_matmul_runs_three_times_faster_on_the_tensor_engine(whatif):
    rng = np.random.default_rng(1)
    # small integers are exact in fp8 e4m3 and their fp32 dot products are exact too
    a = rng.integers(-2, 3, (128, 128)).astype(ml_dtypes.float8_e4m3)
    b = rng.integers(-2, 3, (128, 512)).astype(ml_dtypes.float8_e4m3)
    k = _fp8_matmul_kernel()
    opts = Options(target="trn4-proj", hardware_file=whatif)
    res = trnsim.api.kernel_of(k).run(a, b, options=opts)
    np.testing.assert_array_equal(res.outputs, a.astype(np.float32).T @ b.astype(np.float32))
    assert res.traces[0].target == "trn4-proj"
    est4 = trnsim.time_kernel(k, a, b, target="trn3")
    est5 = trnsim.time_kernel(k, a, b, options=opts)
    # one nc_matmul: occupancy = max(N=512, 64) cycles / fp8_speedup at the same clock and the
    # same warm-up throttle, so the Tensor engine's busy time divides by exactly 3
    busy4 = est4.cores[0].engine_busy_ns()["tensor"]
    busy5 = est5.cores[0].engine_busy_ns()["tensor"]
    assert busy4 / busy5 == pytest.approx(3.0, rel=1e-9)
    assert busy4 >= 512 / 2.4  # at least the unthrottled 512 cycles at 2.4 GHz


def test_the_shipped_projection_file(monkeypatch):
    """trnsim/hardware/examples/trn4-projection.toml: the announced ratios, labelled projection."""
    cat = load_catalog(EXAMPLE)
    chip, trn3 = cat.chips["trn4-proj"], cat.chips["trn3"]
    assert chip.hbm_bandwidth_bytes_per_s == pytest.approx(4 * trn3.hbm_bandwidth_bytes_per_s)
    assert chip.peak_flops.fp8 == pytest.approx(3 * trn3.peak_flops.fp8)
    core = cat.cores[chip.core]
    assert core.generation == 5 and core.timing.tensor.fp8_speedup == 3 * cat.cores["v4"].timing.tensor.fp8_speedup
    # every figure the file states (not inherited) is labelled a projection or cites the announcement
    own = {k: v for k, v in list(core.sources.items()) + list(chip.sources.items())
           if "inherited from" not in v}
    assert len(own) >= 6
    for path, src in own.items():
        assert "PROJECTION" in src or "projection" in src or "TRN4-ANN" in src, path
    assert "re:Invent 2025" in cat.source_tags["TRN4-ANN"]
    assert Options(target="gen5", hardware_file=EXAMPLE).target == "trn4-proj"


def test_whatif_through_the_command_line(whatif, tmp_path, capsys):
    """`trnsim kernel FILE::f --hardware FILE --target trn4-proj` and `trnsim hw show`."""
    import json

    from trnsim.cli.main import main
    src = tmp_path / "k.py"
    src.write_text(textwrap.dedent("""
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.jit
        def double(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.multiply(nl.load(a), 2.0))
            return out
        """))
    rc = main(["kernel", f"{src}::double", "--arg", "a=128x8192:float32", "--target", "trn4-proj",
               "--hardware", whatif, "--json"])
    s = json.loads(capsys.readouterr().out)
    assert rc == 0 and s["target"] == "trn4-proj" and s["hbm_bytes"] == 2 * 128 * 8192 * 4
    rc = main(["hw", "show", "gen5", "--hardware", whatif, "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["key"] == "trn4-proj" and d["core"]["key"] == "v5"
    rc = main(["kernel", f"{src}::double", "--arg", "a=128x8192:float32", "--target", "trn4-proj",
               "--json"])  # without the file the name is unknown: a JSON error, exit 2
    err = json.loads(capsys.readouterr().out)
    assert rc == 2 and err["error"]["rule"] == "target" and err["error"]["value"] == "trn4-proj"


def test_bad_whatif_files_are_named(hw_file_writer):
    clash = hw_file_writer("""
        [cores.v5]
        base = "v4"
        name = "clash"
        generation = 5
        nc_version = "gen5"
        targets = { value = ["trn4-proj", "gen4"], source = "choice: test" }
        [chips.x]
        base = "trn3"
        name = "x"
        core = "v5"
        target = "trn4-proj"
        """)
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(clash)
    assert ei.value.rule == "hardware-file-reference" and ei.value.value == "gen4"
    wrong_target = hw_file_writer("""
        [cores.v5]
        base = "v4"
        name = "v5"
        targets = { value = ["trn4-proj"], source = "choice: test" }
        [chips.x]
        base = "trn3"
        name = "x"
        core = "v5"
        """)  # the chip inherits target = "trn3" from its base, which is v4's name
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(wrong_target)
    assert ei.value.limit == "trn4-proj" and ei.value.value == "trn3"
    bad_base = hw_file_writer("""
        [cores.v5]
        base = "v9"
        """)
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(bad_base)
    assert ei.value.value == "v9" and "v4" in ei.value.limit


@pytest.fixture
def hw_file_writer(tmp_path):
    n = iter(range(1000))

    def write(text):
        p = tmp_path / f"hw_{next(n)}.toml"
        p.write_text(textwrap.dedent(text))
        return str(p)
    return write


def test_kernels_see_the_new_generation_number(whatif):
    """``nisa.get_nc_version()`` of both APIs reports generation 5 and compares with gen4."""
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    import nki as nki_new
    import nki.isa as nisa_new
    import nki.language as nl_new

    @nki.jit
    def legacy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if nisa.get_nc_version() >= nisa.nc_version.gen4:  # a version-gated code path
            t = nl.multiply(t, 3.0)
        nl.store(out, t)
        return out

    seen = []

    @nki_new.jit
    def new(a):
        out = nl_new.ndarray(a.shape, dtype=a.dtype, buffer=nl_new.shared_hbm)
        t = nl_new.ndarray(a.shape, dtype=a.dtype, buffer=nl_new.sbuf)
        nisa_new.dma_copy(dst=t, src=a)
        nisa_new.dma_copy(dst=out, src=t)
        seen.append(int(nisa_new.get_nc_version()))
        return out

    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    opts = Options(target="trn4-proj", hardware_file=whatif)
    np.testing.assert_array_equal(trnsim.api.kernel_of(legacy).run(a, options=opts).outputs, 3 * a)
    np.testing.assert_array_equal(trnsim.api.kernel_of(new).run(a, options=opts).outputs, a)
    assert seen == [5]
