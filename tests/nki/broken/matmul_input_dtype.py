"""The Tensor engine does not multiply int32 tiles."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="matmul-input-dtype", limit="bfloat16, float16", value="int32")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), np.int32), np.zeros((128, 512), np.int32))
