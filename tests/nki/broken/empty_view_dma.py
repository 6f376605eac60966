"""A DMA of an empty shard: slicing rows 64..63 is legal (the view is empty), loading it is not."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="empty-access", limit="at least one element", value=(0, 64))


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    shard = x[64:64, :]
    t = nl.load(shard)  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
