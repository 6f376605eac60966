"""nl.matmul(x, y) contracts over x's last dim: 256 exceeds the 128 rows of the PE array."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="matmul-contraction-limit", limit=128, value=256)


@nki.jit
def kernel(x, w):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(w)
    c = nl.matmul(a, b)  # ERR
    nl.store(out, value=c)
    return out


def args():
    return (np.zeros((128, 256), np.float32), np.zeros((128, 512), np.float32))
