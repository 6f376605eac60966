"""mod_alloc places two 64 KiB tiles from byte 200 KiB: they end past the 224 KiB partition."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="sbuf-address", limit="229376 B per partition", value=335872)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.shared_hbm)
    placement = ncc.sbuf.mod_alloc(base_addr=200 * 1024, num_free_tiles=(2,))
    buf = nl.ndarray((2, nl.par_dim(128), 16384), dtype=nl.float32, buffer=placement)  # ERR
    buf[0] = nl.load(x)
    nl.store(out, value=buf[0])
    return out


def args():
    return (np.zeros((128, 16384), np.float32),)
