"""Iteration i reads the SBUF columns iteration i-1 wrote (a prefix-style dependency) inside
affine_range: a loop-carried dependency, which needs sequential_range."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="partitions [0, 128) bytes [256, 512)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    buf[:, 0:64] = nl.load(x[:, 0:64])
    for i in nl.affine_range(1, 4):
        prev = nl.copy(buf[:, (i - 1) * 64:i * 64])  # ERR2
        buf[:, i * 64:(i + 1) * 64] = nl.add(prev, 1.0)  # ERR
    nl.store(out, value=buf)
    return out


def args():
    return (np.ones((128, 256), np.float32),)
