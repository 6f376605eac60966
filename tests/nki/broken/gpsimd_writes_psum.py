"""GpSimd has no PSUM port: a new-API tensor_copy on the GpSimd engine into a PSUM tile."""
import numpy as np
from trnsim.errors import MemoryAccessError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, psum, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, elementwise
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=MemoryAccessError, rule="gpsimd-psum-access", limit="gpsimd engine psum",
              value="write")


def body(a):
    out = ndarray((128, 64), dt.float32, shared_hbm, "out", conv=NEW)
    t = ndarray((128, 64), dt.float32, sbuf, "t", conv=NEW)
    dma.copy(t, a)
    p = ndarray((128, 64), dt.float32, psum, "p", conv=NEW)
    elementwise.tensor_copy(p, t, engine="gpsimd")  # ERR
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 64), np.float32),)
