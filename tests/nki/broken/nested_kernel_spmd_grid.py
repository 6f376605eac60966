"""A kernel called from another kernel with an SPMD grid."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import LaunchError

EXPECT = dict(error=LaunchError, rule="err_nested_kernel_with_spmd_grid",
              limit="no grid on nested kernel calls", value="grid (2,)")


@nki.jit(mode="trace")
def scale_rows(x, out):
    t = nl.load(x)
    nl.store(out, value=nl.multiply(t, 2.0))


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    scale_rows[2](x, out)  # ERR
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
