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
