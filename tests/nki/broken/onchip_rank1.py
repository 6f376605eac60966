"""An SBUF tensor of shape (128,): on-chip tensors need a partition dim and a free dim."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ShapeError

EXPECT = dict(error=ShapeError, rule="onchip-rank", limit=">= 2", value="(128,)")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128,), dtype=nl.float32, buffer=nl.sbuf)  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((128, 1), np.float32),)
