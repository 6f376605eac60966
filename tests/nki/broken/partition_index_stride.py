"""A partition index of 2 * i on an SBUF tile: partitions cannot be strided."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="partition-index", limit="unit stride", value="2*i0")


@nki.jit
def kernel(x):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    e = nl.exp(t[2 * i_p, i_f])  # ERR
    nl.store(out, value=e)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
