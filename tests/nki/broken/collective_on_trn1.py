"""nki.collectives are documented for Trn2 and Trn3 only."""
import numpy as np
from trnsim.errors import GenerationError
import trnsim.frontends.nki as nki

nl, nisa, ncc = nki.language, nki.isa, nki.collectives

EXPECT = dict(error=GenerationError, rule="generation", target="trn1", limit="gen3+",
              value="gen2")


@nki.jit
def kernel(a):
    src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="src")
    dst = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="dst")
    nisa.dma_copy(dst=src, src=a)
    ncc.all_gather(srcs=[src], dsts=[dst], replica_group=ncc.ReplicaGroup([[0]]), collective_dim=0)  # ERR
    return dst


def args():
    return (np.zeros((128, 64), np.float32),)
