"""An SBUF tile whose partition dim exceeds the 128 partitions of SBUF."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import PartitionError

EXPECT = dict(error=PartitionError, rule="err_num_partition_exceed_arch_limit", limit=128, value=256)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # ERR
    nl.store(out, value=t[0:128, :])
    return out


def args():
    return (np.zeros((128, 4), np.float32),)
