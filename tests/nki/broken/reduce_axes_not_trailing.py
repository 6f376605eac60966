"""nisa.tensor_reduce over axis 1 of a (128, 4, 16) tile: the reduced axes must be the trailing ones."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="reduce-axis", limit="axes k..2", value="(1,)")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nisa.tensor_reduce(nl.add, t, axis=(1,))  # ERR
    nl.store(out, value=s)
    return out


def args():
    return (np.zeros((128, 4, 16), np.float32),)
