"""HBM trace regions are rows x bytes-within-a-row rectangles (a row is the allocation's last
dimension), so column tiles of a row-major tensor are disjoint and dependencies stay exact."""
import numpy as np

import pytest

import trnsim
import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.timing import dependencies  # noqa: E402


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _geo(r):
    return (r.partition, r.partitions, r.start, r.stop)


def test_column_and_row_tiles_are_exact_rectangles():
    @nki.jit
    def k(x):
        out = nl.ndarray((256, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x[0:128, 64:128])        # a column tile: 128 rows, bytes 256..512 of each
        b = nl.load(x[128:256, 0:1024])      # whole rows 128..255
        nl.store(out[0:128, 64:128], value=a)
        nl.store(out[128:256, 0:1024], value=b)
        return out

    tr = trnsim.trace(k, np.zeros((256, 1024), np.float32))
    loads = [i for i in tr if i.opcode == "dma_copy" and i.reads[0].memory == "hbm"]
    assert _geo(loads[0].reads[0]) == (0, 128, 64 * 4, 128 * 4)
    assert _geo(loads[1].reads[0]) == (128, 128, 0, 1024 * 4)
    assert loads[0].reads[0].bytes == 128 * 64 * 4


def test_view_whose_rows_do_not_match_the_pitch_falls_back_to_whole_rows():
    @nki.jit
    def k(x):
        out = nl.ndarray((8, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        y = x.reshape((8, 512))              # rows of 2 KiB over a tensor whose rows are 4 KiB
        a = nl.load(y[0:8, 0:512])           # strides 2048 B: wraps, so rows 0..3 whole
        b = nl.load(y[1:2, 0:512])           # second half of row 0 only
        nl.store(out[0:8, 0:512], value=a)
        nl.store(out[1:2, 0:512], value=b)
        return out

    tr = trnsim.trace(k, np.zeros((4, 1024), np.float32))
    loads = [i for i in tr if i.opcode == "dma_copy" and i.reads[0].memory == "hbm"]
    assert _geo(loads[0].reads[0]) == (0, 4, 0, 4096)
    assert _geo(loads[1].reads[0]) == (0, 1, 2048, 4096)


def test_disjoint_column_tiles_have_no_dependency_and_overlapping_ones_do():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x[0:128, 0:128])
        nl.store(out[0:128, 0:128], value=t)       # 2
        nl.store(out[0:128, 128:256], value=t)     # 3: other columns, independent of 2
        u = nl.load(out[0:128, 64:192])            # 4: straddles both stores
        nl.store(out[0:128, 256:384], value=u)
        return out

    tr = trnsim.trace(k, np.zeros((128, 512), np.float32))
    assert [i.opcode for i in tr] == ["dma_copy"] * 5
    deps = [set(d) for d in dependencies(tr)]
    assert deps[1] == {0} and deps[2] == {0}       # both stores wait only for the load
    assert deps[3] == {1, 2}                        # the reload waits for both stores
    assert deps[4] == {3}
