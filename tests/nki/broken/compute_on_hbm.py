"""A compute op (nl.exp on the Scalar engine) given an HBM tensor: engines read SBUF/PSUM only."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import MemoryAccessError

EXPECT = dict(error=MemoryAccessError, rule="err_unsupported_memory", limit="sbuf or psum",
              value="hbm")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    e = nl.exp(x)  # ERR
    nl.store(out, value=e)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
