"""NeuronCore-v3 (trn2) SBUF-to-SBUF DMA transposes against hand-calculated figures: a flat 0.3197 of
the 16 engines' copy rate (23 B/ns each) whatever the bytes per partition, fitted on row P234; an
HBM-sourced transpose keeps the FIG-DMA chunk curve times 0.9 [ARCH3].  Figures typed in from the data
file's documentation, not read back from the model."""
import pytest

from trnsim.hardware import get_chip, get_core
from trnsim.ir.trace import Instruction, Region
from trnsim.source import SourceLoc
from trnsim.timing import CostModel

LOC = SourceLoc("dma_v3.py", 1, "k")


def transpose(per_part, src_mem="sbuf", parts=128):
    """One dma_transpose of ``parts`` x ``per_part`` bf16 bytes into SBUF."""
    n = parts * per_part // 2
    if src_mem == "hbm":
        src = Region("hbm", 1, "t1", 0, 1, 0, parts * per_part, n, "bfloat16", per_part, False)
    else:
        src = Region("sbuf", 1, "t1", 0, parts, 0, per_part, n, "bfloat16", per_part, False)
    dst = Region("sbuf", 2, "t2", 0, parts, 0, per_part, n, "bfloat16", per_part, False)
    return Instruction(0, "dma", "dma_transpose", (src,), (dst,), parts, per_part // 2, "bfloat16",
                       "bfloat16", (("transpose", True),), LOC, 0)


def test_sbuf_transpose_is_flat_in_the_chunk():
    """[128, 512] bf16 (1 KiB per partition, the attention kernel's P tile): 16 x 23 x 0.3197 =
    117.65 B/ns, so its 131,072 B take 1,114.1 ns; the same at 256 B and 8 KiB per partition
    (the FIG-DMA curve would give 0.10 and 0.98 of copy speed there)."""
    m = CostModel(get_core("trn2"), get_chip("trn2"))
    for per_part in (256, 1024, 8192):
        c = m.dma(transpose(per_part))
        assert c.rate_bytes_per_ns == pytest.approx(117.6496), per_part
    c = m.dma(transpose(1024))
    assert c.bytes / c.rate_bytes_per_ns == pytest.approx(1114.1, abs=0.1)


def test_hbm_transpose_keeps_the_curve():
    """From HBM at 1 KiB per partition: 16 x 23 x 0.43 x 0.9 = 142.42 B/ns."""
    m = CostModel(get_core("trn2"), get_chip("trn2"))
    assert m.dma(transpose(1024, "hbm")).rate_bytes_per_ns == pytest.approx(142.416)
