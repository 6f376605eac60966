"""The Tensor engine writes PSUM only: a new-API nc_matmul whose dst is an SBUF tile."""
import numpy as np
from trnsim.errors import MemoryAccessError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, matmul
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=MemoryAccessError, rule="matmul-dst-psum", limit="psum", value="sbuf")


def body(a, b):
    out = ndarray((128, 512), dt.float32, shared_hbm, "out", conv=NEW)
    s = ndarray((128, 128), dt.bfloat16, sbuf, "s", conv=NEW)
    m = ndarray((128, 512), dt.bfloat16, sbuf, "m", conv=NEW)
    dma.copy(s, a)
    dma.copy(m, b)
    res = ndarray((128, 512), dt.float32, sbuf, "res", conv=NEW)
    matmul.nc_matmul(res, s, m)  # ERR
    dma.copy(out, res)
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 128), dt.bfloat16), np.zeros((128, 512), dt.bfloat16))
