"""nc_matmul with a stationary operand of 256 columns; the PE array has 128."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-stationary-free", limit=128, value=256)


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((128, 256), ml_dtypes.bfloat16), np.zeros((128, 512), ml_dtypes.bfloat16))
