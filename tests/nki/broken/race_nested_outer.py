"""Nested affine_range loops: the inner iterations store disjoint row tiles, but the store ignores
the outer index, so every outer iteration writes the same tiles (the race is on the outer loop
only)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-affine-range", value="rows [0, 128) bytes [0, 256)"),
    dict(error=RaceError, rule="race-affine-range", strict=True, deferred=True,
         value="rows [0, 128) bytes [0, 256)"),
]


@nki.jit
def kernel(x):
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        for j in nl.affine_range(2):
            t = nl.load(x[i, j * 128:(j + 1) * 128, :])
            nl.store(out[j * 128:(j + 1) * 128, :], value=t)  # ERR
    return out


def args():
    return (np.ones((3, 256, 64), np.float32),)
