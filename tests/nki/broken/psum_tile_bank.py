"""A PSUM tile of 1024 fp32 per partition (4 KiB) does not fit one 2 KiB PSUM bank."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="psum-tile-size", limit="2048 B per partition",
              value="4096 B")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((128, 1024), np.float32),)
