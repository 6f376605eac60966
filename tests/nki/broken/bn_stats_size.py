"""bn_stats reads at most 512 elements per partition; the tile has 1024."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="bn_stats-size", limit=512, value=1024)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    st = nisa.bn_stats(t)  # ERR
    nl.store(out, value=st)
    return out


def args():
    return (np.zeros((128, 1024), np.float32),)
