"""Indexing a tile with a 1-D nl.arange (the NKI docs' own err_1d_arange_not_supported example)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_1d_arange_not_supported",
              limit=">= 2-D index expressions", value="1-D index of shape (64,)")


@nki.jit
def kernel(x):
    out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tmp = nl.load(x)
    i = nl.arange(64)
    c = nl.exp(tmp[i, 0])  # ERR
    nl.store(out, value=c)
    return out


def args():
    return (np.zeros((128, 1), np.float32),)
