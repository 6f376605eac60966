"""An SBUF accumulator allocated before an affine_range loop is updated with
``acc[...] = nl.add(acc, t)`` in every iteration: a read-modify-write the compiler does not know
is a reduction (``acc += t`` or nl.loop_reduce say so), so the iterations race."""
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
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        acc[...] = nl.add(acc, t)  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.ones((512, 64), np.float32),)
