"""Each iteration stores 128 columns starting at i*64: neighbouring iterations overlap on 64
columns of the HBM output (a partial overlap, not the same slice)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="rows [0, 128) bytes [256, 512)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 320), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(x[:, i * 64:i * 64 + 128])
        nl.store(out[:, i * 64:i * 64 + 128], value=t)  # ERR
    return out


def args():
    return (np.ones((128, 320), np.float32),)
