"""An indirect load whose index tile (0, 2, ..., 254) points past the 128 rows, unmasked."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import OutOfBoundsError

EXPECT = dict(error=OutOfBoundsError, rule="err_tensor_access_out_of_bound", limit="0..127", value=128)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    rows = nisa.iota(i_p * 2, dtype=nl.int32)
    t = nl.load(x[rows, i_f])  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
