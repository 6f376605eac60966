"""nl.store into a kernel input that is not declared mutable."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import ReadOnlyError

EXPECT = dict(error=ReadOnlyError, rule="err_cannot_update_immutable_parameter",
              limit="read-only unless nt.mutable_tensor", value="write to 'x'")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=t)
    nl.store(x, value=nl.exp(t))  # ERR
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
