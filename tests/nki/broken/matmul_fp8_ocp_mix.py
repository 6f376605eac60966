"""On trn3, OCP float8_e4m3fn cannot be multiplied with the older float8_e4m3."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="matmul-fp8-mix", target="trn3",
              limit="float8_e4m3fn with float8_e4m3fn", value="float8_e4m3fn with float8_e4m3")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.float8_e4m3fn), np.zeros((128, 512), ml_dtypes.float8_e4m3))
