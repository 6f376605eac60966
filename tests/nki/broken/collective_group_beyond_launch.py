"""A replica group naming rank 1 in a launch of one rank: nothing would ever answer it."""
import numpy as np
from trnsim.errors import LaunchError
import trnsim.frontends.nki as nki

nl, nisa, ncc = nki.language, nki.isa, nki.collectives

EXPECT = dict(error=LaunchError, rule="replica-group-rank", limit="ranks 0..0", value="1")


@nki.jit
def kernel(a):
    src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="src")
    dst = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="dst")
    nisa.dma_copy(dst=src, src=a)
    ncc.all_reduce(srcs=[src], dsts=[dst], replica_group=ncc.ReplicaGroup([[0, 1]]), op=nl.add)  # ERR
    return dst


def args():
    return (np.zeros((128, 64), np.float32),)
