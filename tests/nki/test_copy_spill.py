"""Copies trnsim inserts for the compiler (partition broadcasts) never make a kernel fail the SBUF
capacity check: where the kernel's own tiles fit and only the copies overflow, the compiler
spills, and trnsim times the spill DMAs.  A kernel whose own tiles overflow still fails."""
import warnings

import numpy as np
import pytest

from trnsim.errors import CapacityError, SbufSpillWarning
from trnsim.options import Options
from trnsim.timing import estimate

F = 8192   # fp32 columns: 32 KiB per partition, over the 16 KiB PSUM partition, so a DMA copy
TILE = F * 4
SBUF_V2 = 196608   # trn1 SBUF bytes per partition (ARCH2: 192 KiB)


def _kernel(own_tiles):
    """``own_tiles`` [128, F] fp32 loads kept live across a tensor_tensor that reads a
    [1, F] row broadcast over the 128 partitions."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki.jit
    def k(x, row):
        out = nl.ndarray((own_tiles + 1, 128, F), dtype=x.dtype, buffer=nl.shared_hbm)
        held = [nl.load(x) for _ in range(own_tiles)]
        y = nisa.tensor_tensor(held[0], nl.load(row).broadcast_to((128, F)), op=nl.multiply)
        nl.store(out[own_tiles], y)
        for i, t in enumerate(held):
            nl.store(out[i], t)
        return out

    return k


def _run(own_tiles, timing_only=False):
    x = np.full((128, F), 2.0, np.float32)
    row = np.arange(F, dtype=np.float32).reshape(1, F)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = _kernel(own_tiles).run(x, row, options=Options(target="trn1",
                                                             timing_only=timing_only))
    return res, x, row, [m for m in w if issubclass(m.category, SbufSpillWarning)]


def test_a_broadcast_copy_that_overflows_sbuf_is_spilled_not_refused():
    """Own tiles at their peak: 5 held loads + the row (live until the copy reads it), or 5 held
    loads + the result = 6 x 32 KiB = 196608 B, exactly the trn1 partition.  The broadcast copy
    (32 KiB, too wide for PSUM's 16 KiB, so a DMA copy in SBUF) is live with the row at the DMA
    that makes it: 229376 B, 32768 B over.  No error; the spill is timed, the numbers are right."""
    res, x, row, warned = _run(5)
    tr = res.traces[0]
    assert tr.meta["sbuf_spill_cause"] == "copies"
    assert tr.meta["sbuf_spill_bytes_per_partition"] == 7 * TILE - SBUF_V2 == 32768
    assert tr.meta["sbuf_spill_dmas"] > 0
    assert len(warned) == 1 and "partition-broadcast copies" in str(warned[0].message)
    out = res.outputs if not isinstance(res.outputs, tuple) else res.outputs[0]
    np.testing.assert_array_equal(np.asarray(out)[5], x * row)   # numerics unchanged
    np.testing.assert_array_equal(np.asarray(out)[0], x)
    # the spill DMAs are on the timeline: the kernel takes longer than without them
    spilled = estimate([tr], "trn1").latency_us
    assert spilled > 0


def test_spilled_copy_costs_more_than_a_kernel_that_fits():
    """Four held loads (4 + row + copy = 6 x 32 KiB = 196608 B) fit with the copy, so nothing
    spills; with one more held load the spill DMAs come on top of one more load and store."""
    fit, *_ = _run(4, timing_only=True)
    over, *_ = _run(5, timing_only=True)
    assert "sbuf_spill_cause" not in fit.traces[0].meta
    assert over.traces[0].meta["sbuf_spill_cause"] == "copies"
    assert estimate(over.traces, "trn1").latency_us > estimate(fit.traces, "trn1").latency_us


def test_a_kernel_whose_own_tiles_overflow_still_fails():
    """Six held loads: own tiles 6 held + the row = 7 x 32 KiB = 229376 B > 196608 B with no copy
    counted; the kernel is broken and gets its rule error."""
    with pytest.raises(CapacityError) as e:
        _run(6)
    assert e.value.rule == "sbuf-capacity"
    assert "196608" in str(e.value.limit)
