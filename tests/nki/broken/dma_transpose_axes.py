"""nisa.dma_transpose with axes (0, 2, 1): the DMA transposes only 2-D (1, 0), 3-D (2, 1, 0) and
4-D (3, 1, 2, 0) permutations."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="dma-transpose-axes", limit="(2, 1, 0)", value="(0, 2, 1)")


@nki.jit
def kernel(x):
    out = nl.ndarray((16, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nisa.dma_transpose(x, axes=(0, 2, 1))  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((16, 4, 8), np.float32),)
