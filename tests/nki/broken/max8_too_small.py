"""max8 needs at least 8 elements per partition to pick 8 from; the tile has 4."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="max8-size", limit="8..16384", value=4)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    top = nisa.max8(src=t)  # ERR
    nl.store(out, value=top)
    return out


def args():
    return (np.zeros((128, 4), np.float32),)
