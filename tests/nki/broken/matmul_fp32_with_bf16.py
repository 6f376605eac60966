"""An fp32 stationary with a bf16 moving operand: fp32/tf32 must pair with fp32/tf32."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="matmul-fp32-pairing", limit="fp32/tf32 with fp32/tf32",
              value="float32 with bfloat16")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), np.float32), np.zeros((128, 512), ml_dtypes.bfloat16))
