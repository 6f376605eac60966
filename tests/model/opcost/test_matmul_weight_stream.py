"""The reference GEMM holds a row block of lhsT that fits in SBUF (decode, small batches): lhsT is
loaded once, only the weights stream."""
import pytest

from trnsim.kernels.registry import KERNELS
from trnsim.kernels.timer import run_reference


def _hbm(m, k, n, dt="bfloat16", target="trn2"):
    est = run_reference("matmul", {"m": m, "k": k, "n": n}, dt, target)
    return est, est.cores[0].timeline.hbm_bytes


def test_one_row_tile_reads_every_operand_once():
    # m = 16 <= 128: lhsT (4096 x 16), rhs (4096 x 4096) and out (16 x 4096), 2 B each, once
    est, hbm = _hbm(16, 4096, 4096)
    assert hbm == (4096 * 16 + 4096 * 4096 + 16 * 4096) * 2 == 33_816_576
    # no faster than the weights at the core's HBM share: 2.9 TB/s over 8 cores = 362.5 GB/s
    assert est.latency_ns >= 4096 * 4096 * 2 / 362.5
    # and within 1.5x of it (the weight stream runs in 4 KiB rows per partition, near DMA peak)
    assert est.latency_ns <= 1.5 * 4096 * 4096 * 2 / 362.5


def test_narrow_row_blocks_are_held_too():
    # m = 256: lhsT block 8 x 256 x 2 B = 4 KiB per partition, two column blocks of 1024: read once
    _, hbm = _hbm(256, 1024, 2048)
    assert hbm == 1024 * 256 * 2 + 1024 * 2048 * 2 + 256 * 2048 * 2 == 5_767_168


def test_row_blocks_too_big_to_hold_are_reread_per_column_block():
    # m = 2048: 16 row tiles; lhsT block for K = 4096: 32 x 2048 x 2 B = 128 KiB per partition, over
    # the 64 KiB hold budget; 2048 / 1024 = 2 column blocks: lhsT read twice
    _, hbm = _hbm(2048, 4096, 2048)
    assert hbm == 2 * 4096 * 2048 * 2 + 4096 * 2048 * 2 + 2048 * 2048 * 2 == 58_720_256


def test_kernel_version_bumped_for_the_cache_key():
    assert KERNELS["matmul"].version >= 3
