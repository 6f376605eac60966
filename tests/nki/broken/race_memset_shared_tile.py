"""A scratch tile allocated once, before the loop, is cleared and filled in every affine_range
iteration: the iterations share one buffer, so they clobber each other's data (allocate the
scratch tile inside the loop body to get one per iteration)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="partitions [0, 128) bytes [0, 256)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((512, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        scratch[...] = 0.0  # ERR
        scratch[:, 0:32] = nl.load(x[i * 128:(i + 1) * 128, 0:32])
        nl.store(out[i * 128:(i + 1) * 128, :], value=scratch)
    return out


def args():
    return (np.ones((512, 64), np.float32),)
