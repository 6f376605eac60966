"""nc_transpose on the Vector engine handles at most 32 x 32; the tile is 64 x 64."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="err_size_of_dimension_exceed_arch_limit", limit="32x32",
              value="64x64")


@nki.jit
def kernel(x):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nisa.nc_transpose(t, engine=nisa.vector_engine)  # ERR
    nl.store(out, value=tt)
    return out


def args():
    return (np.zeros((64, 64), np.float32),)
