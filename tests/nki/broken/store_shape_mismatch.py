"""nl.store of a (128, 64) tile into a (64, 64) slice of the output."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="err_store_dst_shape_smaller_than_other_shape",
              limit="(64, 64)", value="(128, 64)")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0:64, :], value=t)  # ERR
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
