"""nl.transpose of a (128, 256) tile: the 256 free elements would become 256 partitions."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import PartitionError

EXPECT = dict(error=PartitionError, rule="err_size_of_dimension_exceed_arch_limit", limit=128,
              value=256)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nl.transpose(t)  # ERR
    nl.store(out, value=tt[0:128, :])
    return out


def args():
    return (np.zeros((128, 256), np.float32),)
