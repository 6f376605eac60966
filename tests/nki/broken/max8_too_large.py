"""max8 reads at most 16384 elements per partition; the tile has 20000."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="max8-size", limit="8..16384", value=20000)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    top = nisa.max8(src=t)  # ERR
    nl.store(out, value=top)
    return out


def args():
    return (np.zeros((128, 20000), np.float32),)
