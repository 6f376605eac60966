"""nl.sum over axis 0, the partition dim: reductions run along free dims only."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="reduce-axis", limit="1..1", value="(0,)")


@nki.jit
def kernel(x):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nl.sum(t, axis=0)  # ERR
    nl.store(out, value=s)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
