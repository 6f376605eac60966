"""mod_alloc with one physical tile for two blocks: block 1 overwrites block 0 while block 0 is
still needed, then both are read."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
from trnsim.errors import AliasError

EXPECT = dict(error=AliasError, rule="manual-allocation-alias", limit="owned by 'buf[block 0]'",
              value="'buf[block 1]' wrote partition 0, byte 0")


@nki.jit
def kernel(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    one_tile = ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,))
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=one_tile, name="buf")
    buf[0] = nl.load(x)
    buf[1] = nl.load(y)
    s = nl.add(buf[0], buf[1])  # ERR
    nl.store(out, value=s)
    return out


def args():
    return (np.zeros((128, 64), np.float32), np.ones((128, 64), np.float32))
