"""A block tensor (legacy leading block dims) is allocated block by block: the compiler places each
block as its own tile, so where the kernel's tiles overflow SBUF only because whole block tensors
are counted, it spills blocks and trnsim times the spill DMAs instead of refusing the kernel.  One
block over the partition, or an overflow without block tensors, still fails the capacity rule."""
import warnings

import numpy as np
import pytest

from trnsim.errors import CapacityError, SbufSpillWarning
from trnsim.options import Options

F = 8192           # fp32 columns: one block is 32 KiB per partition
BLOCK = F * 4
SBUF_V2 = 196608   # trn1 SBUF bytes per partition (ARCH2: 192 KiB): six blocks


def _kernel(nblocks, free=F):
    """Fill ``nblocks`` blocks of a zeroed block tensor from HBM, one DMA each, then store them all
    back in order: every block lives from its load to its store."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray((nblocks, 128, free), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((nblocks, nl.par_dim(128), free), dtype=x.dtype)
        for i in nl.affine_range(nblocks):
            acc[i, :, :] = nl.load(x[i])
        for i in nl.affine_range(nblocks):
            nl.store(out[i], acc[i, :, :])
        return out

    return k


def _run(nblocks, free=F, timing_only=False):
    x = (np.arange(nblocks * 128 * free, dtype=np.float32) % 1000).reshape(nblocks, 128, free)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = _kernel(nblocks, free).run(x, options=Options(target="trn1",
                                                            timing_only=timing_only))
    return res, x, [m for m in w if issubclass(m.category, SbufSpillWarning)]


def test_a_block_tensor_over_the_partition_spills_one_block():
    """Seven 32 KiB blocks = 229376 B per partition, 32768 B over the 196608 B partition.  Each
    block is live from its load to its store, so all seven are live when the seventh is loaded:
    one block must leave.  The farthest next use among the six resident blocks is block 5's store
    (Belady): it is written (a store) and read again (a reload), 32 KiB per partition each way on
    128 partitions: 2 DMAs, 2 x 128 x 32768 = 8388608 B of spill traffic.  Values unchanged."""
    res, x, warned = _run(7)
    tr = res.traces[0]
    assert tr.meta["sbuf_spill_cause"] == "blocks"
    assert tr.meta["sbuf_spill_bytes_per_partition"] >= 7 * BLOCK - SBUF_V2 == 32768
    assert tr.meta["sbuf_spill_dmas"] == 2
    assert tr.meta["sbuf_spill_traffic_bytes"] == 2 * 128 * BLOCK == 8388608
    assert len(warned) == 1 and "block tensors" in str(warned[0].message)
    np.testing.assert_array_equal(res.outputs[0] if isinstance(res.outputs, (list, tuple))
                                  else res.outputs, x)


def test_spilled_blocks_are_timed():
    """The spill DMAs cost time: seven blocks take longer than six (no spill) by more than the
    seventh block's own load and store alone would add on a partition that holds it."""
    from trnsim.timing import estimate
    six, _, w6 = _run(6, timing_only=True)
    seven, _, w7 = _run(7, timing_only=True)
    assert not w6 and w7
    assert "sbuf_spill_dmas" not in six.traces[0].meta
    assert estimate(seven.traces, "trn1").latency_us > estimate(six.traces, "trn1").latency_us


def test_one_block_over_the_partition_is_still_refused():
    """A single block of 196612 B (49153 fp32) is one tile bigger than the partition: the rule
    error names the limit, the value and the user line."""
    with pytest.raises(CapacityError) as e:
        _run(2, free=SBUF_V2 // 4 + 1, timing_only=True)
    err = e.value
    assert err.rule == "sbuf-capacity"
    assert str(SBUF_V2) in str(err.limit) and str(SBUF_V2 + 4) in str(err.value)
    assert "test_block_spill.py" in str(err.where)


def test_an_overflow_not_only_from_block_tensors_is_still_refused():
    """Six held 32 KiB loads fill the 196608 B partition by themselves; a two-block tensor needs
    at least one more 32 KiB block live with them: 229376 B, over even with each block its own
    tile, so the kernel is refused with the rule, the limit, the value and the user line."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x):
        out = nl.ndarray((8, 128, F), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((2, nl.par_dim(128), F), dtype=x.dtype)
        held = [nl.load(x[0]) for _ in range(6)]
        acc[0, :, :] = nl.load(x[1])
        nl.store(out[6], acc[0, :, :])
        for i, t in enumerate(held):
            nl.store(out[i], t)
        return out

    x = np.ones((2, 128, F), np.float32)
    with pytest.raises(CapacityError) as e:
        k.run(x, options=Options(target="trn1", timing_only=True))
    err = e.value
    assert err.rule == "sbuf-capacity"
    assert str(SBUF_V2) in str(err.limit)
    assert int(str(err.value).split()[0]) >= 7 * BLOCK == 229376
    assert "test_block_spill.py" in str(err.where)
