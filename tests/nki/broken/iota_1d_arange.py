"""nisa.iota of a 1-D nl.arange: index expressions must be lifted to >= 2-D."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_1d_arange_not_supported",
              limit=">= 2-D index expressions", value="1-D expression of shape (128,)")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    ids = nisa.iota(nl.arange(128), dtype=nl.int32)  # ERR
    nl.store(out, value=ids)
    return out


def args():
    return (np.zeros((128, 1), np.float32),)
