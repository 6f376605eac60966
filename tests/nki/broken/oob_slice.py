"""A slice running past the end of an HBM tensor (rows 64..191 of 128), without a mask."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import OutOfBoundsError

EXPECT = dict(error=OutOfBoundsError, rule="err_tensor_access_out_of_bound", limit="0..127", value=128)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x[64:192, :])  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
