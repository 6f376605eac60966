"""A subscript mixing an nl.arange index with a slice."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_unsupported_mixing_basic_advanced_tensor_indexing",
              limit="all basic (ints/slices) or all advanced", value="slice(0, 64, None)")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    t = nl.load(x[i_p, 0:64])  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
