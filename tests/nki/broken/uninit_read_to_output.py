"""Half of an SBUF tile is never written, yet the whole tile is stored to the output.

trnsim tracks which bytes were written: by default a warning, with strict mode an error.  (The
official simulator only fills fresh memory with NaN.)"""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import UninitializedReadError, UninitializedReadWarning

EXPECT = [
    dict(warning=UninitializedReadWarning, rule="uninitialized-read"),
    dict(error=UninitializedReadError, rule="uninitialized-read", strict=True),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(x[0:64, :])
    nl.store(out, value=t)  # ERR
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
