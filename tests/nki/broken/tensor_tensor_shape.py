"""nisa.tensor_tensor on tiles with different elements per partition (64 vs 32)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="err_num_partition_mismatch", limit="(128, 64)",
              value="(128, 32)")


@nki.jit
def kernel(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    s = nisa.tensor_tensor(a, b, op=nl.add)  # ERR
    nl.store(out, value=s)
    return out


def args():
    return (np.zeros((128, 64), np.float32), np.zeros((128, 32), np.float32))
