"""An SPMD grid of 4 programs where every program stores into the same output tile (it forgot
program_id): the programs run in no defined order, so the result is whichever lands last."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import RaceError, RaceWarning

EXPECT = [
    dict(warning=RaceWarning, rule="race-spmd", value="rows [0, 128) bytes [0, 256)"),
    dict(error=RaceError, rule="race-spmd", strict=True, deferred=True),
]


@nki.jit
def body(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.load(x[i * 128:(i + 1) * 128, :])
    nl.store(out[0:128, :], value=t)  # ERR
    return out


KERNEL = body[4]


def args():
    return (np.ones((512, 64), np.float32),)
