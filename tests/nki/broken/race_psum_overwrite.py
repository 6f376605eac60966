"""A PSUM tile allocated before the loop is *assigned* (not accumulated) a matmul result in every
affine_range iteration: ``ps[...] = nisa.nc_matmul(...)`` overwrites; ``ps += ...`` would be the
legal K-loop accumulation."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="partitions [0, 128) bytes [0, 512)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True),
]


@nki.jit
def kernel(a, b):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        at = nl.load(a[k * 128:(k + 1) * 128, :])
        bt = nl.load(b[k * 128:(k + 1) * 128, :])
        ps[...] = nisa.nc_matmul(at, bt)  # ERR
    nl.store(out, value=nl.copy(ps))
    return out


def args():
    return (np.ones((512, 128), np.float32), np.ones((512, 128), np.float32))
