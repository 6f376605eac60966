"""An affine index expression (i + 64 for i < 128) past the 128 rows, with no mask to cut it."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import OutOfBoundsError

EXPECT = dict(error=OutOfBoundsError, rule="err_tensor_access_out_of_bound", limit="0..127", value=128)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[i_p + 64, i_f])  # ERR
    nl.store(out[i_p, i_f], value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
