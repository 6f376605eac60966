"""Every iteration of an affine_range loop stores into the same HBM row: the iterations have no
order (the compiler may run them in parallel), so which one's data survives is undefined."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="rows [0, 1) bytes [0, 256)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True,
         value="rows [0, 1) bytes [0, 256)"),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(x[i:i + 1, :])
        nl.store(out[0:1, :], value=t)  # ERR
    return out


def args():
    return (np.ones((4, 64), np.float32),)
