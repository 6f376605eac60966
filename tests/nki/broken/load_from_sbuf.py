"""nl.load reads HBM; its source here is an SBUF tile."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import MemoryAccessError

EXPECT = dict(error=MemoryAccessError, rule="err_unsupported_memory", limit="hbm", value="sbuf")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nl.load(t)  # ERR
    nl.store(out, value=u)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
