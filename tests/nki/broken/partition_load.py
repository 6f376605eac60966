"""nl.load of an HBM block whose first dim (the tile's partition dim) is 256."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import PartitionError

EXPECT = dict(error=PartitionError, rule="err_num_partition_exceed_arch_limit", limit=128, value=256)


@nki.jit
def kernel(x):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)  # ERR
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((256, 64), np.float32),)
