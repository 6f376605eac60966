"""A 32-partition slice starting at partition 16 used by a compute op: a <= 32-partition access
must start at partition 0, 32, 64 or 96."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import PartitionError

EXPECT = dict(error=PartitionError, rule="partition-start-alignment",
              limit="<= 32 partitions must start at a multiple of 32", value=16)


@nki.jit
def kernel(x):
    out = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    e = nl.exp(t[16:48, :])  # ERR
    nl.store(out, value=e)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
