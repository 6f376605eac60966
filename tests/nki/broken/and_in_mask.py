"""A mask joined with Python 'and' instead of '&'."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_unsupported_expression_in_mask",
              limit="& and | of comparisons", value="< 64")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p < 64 and i_f < 32))  # ERR
    nl.store(out[i_p, i_f], value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
