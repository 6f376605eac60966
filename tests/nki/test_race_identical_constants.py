"""LNC cores (or loop iterations) that write the same constant to the same bytes leave the same
bytes in either order: not a race (the NKI library's bwmm_shard_on_I zero-initialises its shared
output from both cores, bwmm_shard_on_I.py output_initialization).  Different constants, a
constant against data, or a read against a constant write are still races.  The expected
outputs are written by hand."""
import warnings

import numpy as np

import trnsim.frontends.nki as nnki
from trnsim.errors import RaceWarning
from trnsim.nki.harness import as_kernel
from trnsim.options import Options

nl = nnki.language
nisa = nnki.isa


def _races(kernel, *args):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        r = as_kernel(kernel).run(*args, options=Options())
    return r, [w.message for w in rec if issubclass(w.category, RaceWarning)]


def _init_then_halves(fill):
    """Both cores fill the whole shared output with ``fill(core)`` (memset tile -> DMA), meet at a
    barrier, then each core writes its own half of the rows from ``x``."""
    @nnki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        z = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(z, value=fill(c))
        nisa.dma_copy(dst=out, src=z)
        nisa.core_barrier(out, (0, 1))
        h = x.shape[0] // 2
        t = nl.ndarray((h, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c * h:(c + 1) * h, :])
        nisa.dma_copy(dst=out[c * h:(c + 1) * h, :], src=t)
        return out
    return k


def test_both_cores_writing_the_same_zeros_is_not_a_race():
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    r, found = _races(_init_then_halves(lambda c: 0.0)[2], x)
    assert found == []
    np.testing.assert_array_equal(r.outputs, x)


def test_cores_writing_different_constants_still_race():
    x = np.ones((64, 8), np.float32)
    _, found = _races(_init_then_halves(lambda c: float(c))[2], x)
    assert len(found) == 1 and found[0].rule == "race-lnc"


def test_a_constant_against_data_still_races():
    @nnki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.memset(t, value=0.0)
        else:
            nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out
    _, found = _races(k[2], np.ones((64, 8), np.float32))
    assert len(found) == 1 and found[0].rule == "race-lnc"


def test_a_read_against_a_constant_write_still_races():
    @nnki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        z = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(z, value=0.0)
        if nl.program_id(0) == 0:
            nisa.dma_copy(dst=out, src=z)
        else:
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=out)       # core 1 reads what core 0 may be writing
            nisa.dma_copy(dst=x, src=t)
        nisa.core_barrier(out, (0, 1))
        return out
    _, found = _races(k[2], np.ones((64, 8), np.float32))
    assert len(found) == 1 and found[0].rule == "race-lnc"


def test_zeros_then_data_from_one_core_still_races():
    @nnki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        z = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(z, value=0.0)
        nisa.dma_copy(dst=out, src=z)
        if nl.program_id(0) == 0:
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=out, src=t)   # core 1's zeros may land after this
        return out
    _, found = _races(k[2], np.ones((64, 8), np.float32))
    assert len(found) == 1 and found[0].rule == "race-lnc"
