"""nc_matmul with a moving operand of 1024 columns; one fp32 PSUM bank holds 512 (trn2)."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-moving-free", limit=512, value=1024)


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((128, 1024), ml_dtypes.bfloat16))
