"""An index tile used to gather from an SBUF tile: indirect access goes through DMA from HBM."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_indirect_indices_free_dim", limit="hbm", value="sbuf")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    rows = nisa.iota(127 - i_p, dtype=nl.int32)
    e = nl.exp(t[rows, i_f])  # ERR
    nl.store(out, value=e)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
