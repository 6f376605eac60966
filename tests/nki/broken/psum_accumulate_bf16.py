"""Accumulating matmuls into a bf16 PSUM tile on trn2: PSUM accumulates in fp32 before NeuronCore-v4."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="psum-accumulate-dtype", limit="float32", value="bfloat16")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.bfloat16, buffer=nl.psum)
    for k in nl.affine_range(2):
        acc += nisa.nc_matmul(nl.load(s[k]), nl.load(m[k]))  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((2, 128, 128), ml_dtypes.bfloat16), np.zeros((2, 128, 512), ml_dtypes.bfloat16))
