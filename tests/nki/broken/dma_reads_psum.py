"""nisa.dma_copy straight from a PSUM accumulator to HBM: DMA cannot read PSUM."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import MemoryAccessError

EXPECT = dict(error=MemoryAccessError, rule="dma-psum-source", limit="DMA reads hbm or sbuf",
              value="psum")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(st, mv)
    nisa.dma_copy(dst=out, src=acc)  # ERR
    return out


def args():
    return (np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((128, 512), ml_dtypes.bfloat16))
