"""nl.transpose takes a 2-D tile; this one is 3-D."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="err_exceed_max_supported_dimension", limit=2, value=3)


@nki.jit
def kernel(x):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nl.transpose(t)  # ERR
    nl.store(out, value=tt)
    return out


def args():
    return (np.zeros((128, 4, 16), np.float32),)
