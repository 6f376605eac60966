"""psum.mod_alloc of 4 bank tiles from bank 6 needs banks 6..9; PSUM has 8 banks."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="psum-address", limit="8 banks", value=10)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    banks = ncc.psum.mod_alloc(base_bank=6, num_bank_tiles=(4,))
    acc = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=banks)  # ERR
    acc[0] = nl.load(x)
    nl.store(out, value=acc[0])
    return out


def args():
    return (np.zeros((128, 512), np.float32),)
