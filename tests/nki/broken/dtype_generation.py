"""float8_e4m3fn (OCP) exists from NeuronCore-v4 (trn3); trn2 does not have it."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import GenerationError

EXPECT = dict(error=GenerationError, rule="generation", limit="gen4+", value="gen3")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float8_e4m3fn, buffer=nl.sbuf)  # ERR
    t[...] = nl.load(x)
    nl.store(out, value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
