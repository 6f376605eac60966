"""A trace-mode sub-kernel allocating nl.shared_hbm: only the top-level kernel may."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import KernelError

EXPECT = dict(error=KernelError, rule="err_shared_hbm_must_in_kernel_level",
              limit="top-level kernel scope", value="sub-kernel depth 1")


@nki.jit(mode="trace")
def exp_to_hbm(t):
    res = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)  # ERR
    nl.store(res, value=nl.exp(t))
    return res


@nki.jit
def kernel(x):
    t = nl.load(x)
    return exp_to_hbm(t)


def args():
    return (np.zeros((128, 64), np.float32),)
