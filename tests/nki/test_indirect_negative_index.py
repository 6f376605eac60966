"""Indirect DMA rows are unsigned 32-bit (the ISA's index tiles are uint32): a row index of -1
(the NKI library's "no token" marker) is out of bounds, even when the view starts at an offset
that a signed -1 would step back from.  Reference: the rows a numpy scatter writes, by hand."""
import numpy as np
import pytest

from trnsim.errors import TrnsimError
import trnsim.frontends.nki as nki

nl = nki.language
nisa = nki.isa


def _scatter(rows, oob):
    """out[2, 4, 8]: partition p of src goes to out[1, rows[p], :] (view offset = one shard)."""
    @nki.jit
    def k(src, idx_in, out):
        idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=idx_in)
        t = nl.ndarray((4, 8), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src)
        nisa.dma_copy(dst=out.reshape((8, 8)).ap([[8, 4], [1, 8]], offset=4 * 8, vector_offset=idx,
                                                 indirect_dim=0), src=t, oob_mode=oob)
        return out
    src = np.arange(1, 33, dtype=np.float32).reshape(4, 8)
    return src, k(src, np.array(rows, np.int32).reshape(4, 1), np.zeros((2, 4, 8), np.float32))


def test_minus_one_is_skipped_not_written_to_the_previous_shard():
    src, got = _scatter([0, -1, 2, 4], nisa.oob_mode.skip)
    want = np.zeros((2, 4, 8), np.float32)
    want[1, 0] = src[0]
    want[1, 2] = src[2]          # -1 and 4 (one past the last row) are dropped
    np.testing.assert_array_equal(got, want)
    assert not got[0].any()      # a signed -1 would have landed on out[0, 3]


def test_minus_one_is_an_error_without_skip():
    with pytest.raises(TrnsimError):
        _scatter([0, -1, 2, 3], nisa.oob_mode.error)


def test_in_range_rows_still_scatter():
    src, got = _scatter([3, 2, 1, 0], nisa.oob_mode.error)
    np.testing.assert_array_equal(got[1], src[::-1])
    assert not got[0].any()
