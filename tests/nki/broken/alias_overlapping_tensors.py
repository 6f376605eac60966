"""Two manually placed tensors overlap (bytes 128..255); writing the second clobbers the first,
which is then read.  The official simulator gives each tensor its own storage and misses this."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
from trnsim.errors import AliasError

EXPECT = dict(error=AliasError, rule="manual-allocation-alias", limit="bytes 0..255",
              value="wrote partition 0, byte 128")


@nki.jit
def kernel(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    b = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=128))
    a[...] = nl.load(x)
    b[...] = nl.load(y)
    r = nl.exp(a)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 64), np.float32), np.ones((128, 64), np.float32))
