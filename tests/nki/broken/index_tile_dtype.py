"""An indirect load whose index tile holds floats: index tiles must hold integers."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="index-tile-dtype", limit="an integer dtype", value="float32")


@nki.jit
def kernel(x, rows):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_f = nl.arange(64)[None, :]
    idx = nl.load(rows)
    t = nl.load(x[idx, i_f])  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32), np.arange(128, dtype=np.float32).reshape(128, 1))
