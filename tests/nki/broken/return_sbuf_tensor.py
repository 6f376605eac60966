"""A kernel returning an SBUF tile instead of an HBM tensor."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import LaunchError

EXPECT = dict(error=LaunchError, rule="kernel-output-memory", limit="hbm / shared_hbm",
              value="sbuf", deferred=True)


@nki.jit
def kernel(x):
    t = nl.load(x)
    r = nl.exp(t)  # ERR
    return r


def args():
    return (np.zeros((128, 64), np.float32),)
