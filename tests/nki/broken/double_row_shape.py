"""double_row operands must be [K, 2, F] (the 2 K-halves on the most-major free dim)."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-double-row-shape", limit="[K, 2, F]", value="(128, 128)")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv, perf_mode="double_row")  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.float8_e4m3), np.zeros((128, 512), ml_dtypes.float8_e4m3))
