"""nisa.dma_copy from HBM into a PSUM tile: DMA cannot write PSUM."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import MemoryAccessError

EXPECT = dict(error=MemoryAccessError, rule="dma-psum-dest", limit="DMA writes hbm or sbuf",
              value="psum")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=acc, src=x)  # ERR
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((128, 512), np.float32),)
