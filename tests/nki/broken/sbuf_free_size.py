"""A Scalar-engine op over 70000 elements per partition; one instruction reads at most 65536
elements per partition from SBUF."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="sbuf-free-size", limit=65536, value=70000)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 70000), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    e = nl.exp(t)  # ERR
    nl.store(out, value=e)
    return out


def args():
    return (np.zeros((128, 70000), ml_dtypes.bfloat16),)
