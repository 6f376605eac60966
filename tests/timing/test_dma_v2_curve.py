"""NeuronCore-v2 (trn1) DMA transfers against hand-calculated figures: transfers with an HBM side
follow trn1's calibrated curve (0.383 of 16 engines x 17 B/ns from 256 B per partition up, fitted
on the matmul-ladder rows K001 K003 K005 K007), SBUF-to-SBUF copies and every trn2 transfer keep
the generic FIG-DMA curve.  Figures are typed in here from the data file's documentation, not read
back from the model."""
import pytest

from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, schedule

LOC = SourceLoc("dma_v2.py", 1, "k")


def model(target):
    return CostModel(get_core(target), get_chip(target))


def load(per_part, parts=128, src_mem="hbm", dtype="float32", width=4):
    """One DMA of ``parts`` x ``per_part`` bytes into SBUF, the source contiguous per partition."""
    if src_mem == "hbm":
        src = Region("hbm", 1, "t1", 0, 1, 0, parts * per_part, parts * per_part // width, dtype,
                     per_part, False)
    else:
        src = Region("sbuf", 1, "t1", 0, parts, 0, per_part, parts * per_part // width, dtype,
                     per_part, False)
    dst = Region("sbuf", 2, "t2", 0, parts, 0, per_part, parts * per_part // width, dtype,
                 per_part, False)
    return Instruction(0, "dma", "dma_copy", (src,), (dst,), parts, per_part // width, dtype, dtype,
                       (), LOC, 0)


def test_mamba_v1_delta_load_on_trn1():
    """delta[0, 0:128, 0:512] fp32 (2 KiB per partition) from HBM: 16 engines x 17 B/ns x 0.383
    = 104.176 B/ns; 262,144 B / 104.176 = 2,516.34 ns, plus the fixed 1,300 ns.  (The generic
    curve's 0.81 at 2 KiB gave 220.32 B/ns: 1,189.8 ns.)"""
    c = model("trn1").dma(load(2048))
    assert c.engines == 16
    assert c.rate_bytes_per_ns == pytest.approx(16 * 17 * 0.383)
    tl = schedule(Trace(target="trn1", instructions=[load(2048)]), model("trn1"))
    assert tl.end[0] == pytest.approx(1300 + 262144 / 104.176, rel=1e-9)


def test_rate_is_flat_from_256_bytes_to_32_kib_per_partition():
    """The four ladder rows reach the same throughput for 256 B, 1 KiB, 2 KiB and 4 KiB per
    partition: 104.176 B/ns at every chunk on the curve, and beyond its last point."""
    m = model("trn1")
    for per_part in (256, 1024, 4096, 32768, 65536):
        assert m.dma(load(per_part)).rate_bytes_per_ns == pytest.approx(104.176), per_part


def test_below_the_smallest_measured_chunk_each_descriptor_costs_a_256_byte_one():
    """A [128, 1] fp32 column (4 B per partition, mamba's A_i): 0.383 x 4 / 256 = 0.005984 of
    272 B/ns = 1.6277 B/ns; its 512 B take 314.55 ns, the time of 8 descriptors of 256 B per
    engine at 6.511 B/ns (8 x 39.32 ns)."""
    c = model("trn1").dma(load(4))
    assert c.rate_bytes_per_ns == pytest.approx(272 * 0.383 * 4 / 256)
    assert c.bytes / c.rate_bytes_per_ns == pytest.approx(8 * 256 / (17 * 0.383))


def test_a_one_partition_load_uses_one_engine_at_the_calibrated_rate():
    """B[0, 0:1, 0:512] fp32 (2 KiB on one partition): one engine, 17 x 0.383 = 6.511 B/ns,
    2048 / 6.511 = 314.55 ns."""
    c = model("trn1").dma(load(2048, parts=1))
    assert c.engines == 1
    assert c.bytes / c.rate_bytes_per_ns == pytest.approx(2048 / 6.511)


def test_sbuf_to_sbuf_copies_keep_the_generic_curve():
    """No trn1 row measures on-chip copies: 2 KiB per partition SBUF -> SBUF at FIG-DMA's 0.81,
    16 x 17 x 0.81 = 220.32 B/ns."""
    c = model("trn1").dma(load(2048, src_mem="sbuf"))
    assert c.rate_bytes_per_ns == pytest.approx(220.32)


def test_trn2_keeps_the_generic_curve():
    """trn2 (NeuronCore-v3) has no calibrated HBM curve: 2 KiB per partition from HBM at 0.81 of
    16 x 23 B/ns = 298.08 B/ns."""
    c = model("trn2").dma(load(2048))
    assert c.rate_bytes_per_ns == pytest.approx(298.08)


def _store_then_load_trace():
    """load A [128, 512] fp32; Vector copies it to U; store U; then (program order) load B
    [128, 2048] fp32, which needs nothing and is 4x longer than the queues' gap before the store."""
    a_hbm = Region("hbm", 1, "A", 0, 1, 0, 262144, 65536, "float32", 2048, False)
    a = Region("sbuf", 2, "a", 0, 128, 0, 2048, 65536, "float32", 2048, False)
    u = Region("sbuf", 3, "u", 0, 128, 0, 2048, 65536, "float32", 2048, False)
    out = Region("hbm", 4, "O", 0, 1, 0, 262144, 65536, "float32", 2048, False)
    b_hbm = Region("hbm", 5, "B", 0, 1, 0, 1048576, 262144, "float32", 8192, False)
    b = Region("sbuf", 6, "b", 0, 128, 0, 8192, 262144, "float32", 8192, False)
    t = Trace(target="trn1")
    for k, (eng, op, r, w, free) in enumerate((("dma", "dma_copy", a_hbm, a, 512),
                                               ("vector", "tensor_copy", a, u, 512),
                                               ("dma", "dma_copy", u, out, 512),
                                               ("dma", "dma_copy", b_hbm, b, 2048))):
        t.append(Instruction(k, eng, op, (r,), (w,), 128, free, "float32", "float32", (), LOC, 0))
    return t


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_ready_load_is_triggered_before_a_store_that_waits_on_compute(backend):
    """By hand (trn1): load A 1,300 + 262,144 / 104.176 = 3,816.34 ns; the Vector copy 60 + 512 =
    572 cycles at 1.12 GHz = 510.71 ns plus its 100-cycle latency (89.29 ns): done at 4,416.34; the
    store is ready at 5,716.34 and would move its 256 KiB in 2,516.34 ns.  Load B (1 MiB,
    10,065.71 ns) is ready at 1,300 but cannot fit the 1,900 ns gap from 3,816.34: in program order
    it follows the store (8,232.68 -> 18,298.39); triggered first (the DMA stream reordered, as on
    v2) it runs 3,816.34 -> 13,882.05 and the store follows (-> 16,398.39)."""
    import dataclasses
    from trnsim.timing import native
    if backend == "native" and not native.available():
        pytest.skip("C extension not built")
    core, chip = get_core("trn1"), get_chip("trn1")
    a_end = 1300 + 262144 / 104.176
    copy_end = a_end + 572 / 1.12 + 100 / 1.12
    store, b = 262144 / 104.176, 1048576 / 104.176
    tl = schedule(_store_then_load_trace(), CostModel(core, chip), backend=backend)
    assert tl.start[3] == pytest.approx(a_end) and tl.end[3] == pytest.approx(a_end + b)
    assert tl.start[2] == pytest.approx(a_end + b) and tl.end[2] == pytest.approx(a_end + b + store)
    t = core.timing
    off = dataclasses.replace(core, timing=dataclasses.replace(
        t, reorder=dataclasses.replace(t.reorder, dma_triggers=False)))
    tl = schedule(_store_then_load_trace(), CostModel(off, chip), backend=backend)
    assert tl.start[2] == pytest.approx(copy_end + 1300)
    assert tl.start[3] == pytest.approx(copy_end + 1300 + store)
    assert tl.end[3] == pytest.approx(copy_end + 1300 + store + b)


@pytest.mark.parametrize("text", [
    # one curve point for two byte points
    '[cores.v2.timing.dma]\nhbm_efficiency = { value = [0.5], source = "choice: test" }\n',
    # a fraction above 1
    '[cores.v2.timing.dma]\nhbm_efficiency = { value = [0.5, 1.5], source = "choice: test" }\n',
    # bytes not increasing
    '[cores.v2.timing.dma]\nhbm_efficiency_bytes = { value = [4096, 256], source = "choice: test" }\n',
    # a curve without byte points on a core that has none of its own
    '[cores.v3.timing.dma]\nhbm_efficiency = { value = [0.5], source = "choice: test" }\n',
])
def test_a_malformed_hbm_curve_is_refused_naming_the_rule(tmp_path, text):
    from trnsim.errors import HardwareFileError
    from trnsim.hardware import load_catalog
    p = tmp_path / "hw.toml"
    p.write_text(text)
    with pytest.raises(HardwareFileError) as e:
        load_catalog(str(p))
    assert e.value.rule == "hardware-file-range"
    assert "hbm_efficiency" in str(e.value)
