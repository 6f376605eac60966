"""nc_matmul operands must share the contraction (partition) dim: 128 against 64."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-contraction", limit=128, value=64)


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((64, 512), ml_dtypes.bfloat16))
