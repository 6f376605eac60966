"""PE row/column tiling on trn1 works in 64-row/column steps; a tile at column 32 is off-grid."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-tiling-granularity", target="trn1", limit=64, value=32)


@nki.jit
def kernel(s, m):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv, tile_position=(0, 32), tile_size=(64, 64))  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((64, 64), ml_dtypes.bfloat16), np.zeros((64, 512), ml_dtypes.bfloat16))
