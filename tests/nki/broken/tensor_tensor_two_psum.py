"""nisa.tensor_tensor with both inputs in PSUM (the engines read at most one PSUM input)."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import MemoryAccessError

EXPECT = dict(error=MemoryAccessError, rule="tensor_tensor-two-psum", limit="at most 1 PSUM input",
              value="data1 and data2 in PSUM")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    p1 = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    p2 = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    p1 += nisa.nc_matmul(st, mv)
    p2 += nisa.nc_matmul(st, mv)
    r = nisa.tensor_tensor(p1, p2, op=nl.add)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((128, 512), ml_dtypes.bfloat16))
