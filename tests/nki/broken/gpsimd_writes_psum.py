"""GpSimd has no PSUM port: a new-API tensor_copy on the GpSimd engine into a PSUM tile."""
import numpy as np
from trnsim.errors import MemoryAccessError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, psum, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, elementwise

EXPECT = dict(error=MemoryAccessError, rule="gpsimd-psum-access", limit="gpsimd engine psum",
              value="write")


def body(a):
    out = ndarray((128, 64), dt.float32, shared_hbm, "out", legacy=False)
    t = ndarray((128, 64), dt.float32, sbuf, "t", legacy=False)
    dma.copy(t, a)
    p = ndarray((128, 64), dt.float32, psum, "p", legacy=False)
    elementwise.tensor_copy(p, t, engine="gpsimd")  # ERR
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 64), np.float32),)
