"""Write-after-read across iterations: iteration i reads block i+1 of an SBUF tile and writes
block i, so iteration 1 overwrites what iteration 0 still has to read."""
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
    buf = nl.ndarray((128, 320), dtype=nl.float32, buffer=nl.sbuf)
    buf[...] = nl.load(x)
    for i in nl.affine_range(4):
        nxt = nl.multiply(buf[:, (i + 1) * 64:(i + 2) * 64], 0.5)  # ERR2
        buf[:, i * 64:(i + 1) * 64] = nl.add(nxt, 1.0)  # ERR
    nl.store(out, value=buf[:, 0:256])
    return out


def args():
    return (np.ones((128, 320), np.float32),)
