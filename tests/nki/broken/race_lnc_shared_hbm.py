"""LNC=2: each core loads its own half of the input (program_id) but writes it over the whole
shared HBM output, with no core_barrier ordering the two writes: the output is either half."""
import numpy as np
import trnsim.frontends.nki as nki
from trnsim.errors import RaceError, RaceWarning

nl = nki.language
nisa = nki.isa

EXPECT = [
    dict(warning=RaceWarning, rule="race-lnc", value="rows [0, 64) bytes [0, 64)"),
    dict(error=RaceError, rule="race-lnc", strict=True, deferred=True),
]


@nki.jit
def body(x):
    out = nl.ndarray((64, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((64, 16), dtype=x.dtype, buffer=nl.sbuf)
    c = nl.program_id(0)
    nisa.dma_copy(dst=t, src=x[c * 64:(c + 1) * 64, :])
    nisa.dma_copy(dst=out, src=t)  # ERR
    return out


KERNEL = body[2]


def args():
    return (np.ones((128, 16), np.float32),)
