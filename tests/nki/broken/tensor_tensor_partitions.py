"""nisa.tensor_tensor on tiles with different partition counts (128 vs 64)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="err_num_partition_mismatch", limit=128, value=64)


@nki.jit
def kernel(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    s = nisa.tensor_tensor(a, b, op=nl.multiply)  # ERR
    nl.store(out, value=s)
    return out


def args():
    return (np.zeros((128, 64), np.float32), np.zeros((64, 64), np.float32))
