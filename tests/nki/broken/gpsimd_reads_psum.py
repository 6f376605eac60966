"""GpSimd has no PSUM port: a new-API tensor_partition_reduce (GpSimd) reading a matmul result
straight from PSUM.  (Legacy kernels get a compiler-inserted copy to SBUF instead.)"""
import numpy as np
from trnsim.errors import MemoryAccessError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, psum, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, reduce, matmul
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=MemoryAccessError, rule="gpsimd-psum-access", limit="gpsimd engine psum",
              value="read")


def body(a, b):
    out = ndarray((1, 512), dt.float32, shared_hbm, "out", conv=NEW)
    s = ndarray((128, 128), dt.bfloat16, sbuf, "s", conv=NEW)
    m = ndarray((128, 512), dt.bfloat16, sbuf, "m", conv=NEW)
    dma.copy(s, a)
    dma.copy(m, b)
    acc = ndarray((128, 512), dt.float32, psum, "acc", conv=NEW)
    matmul.nc_matmul(acc, s, m)
    col = ndarray((1, 512), dt.float32, sbuf, "col", conv=NEW)
    reduce.partition_reduce(col, "add", acc)  # ERR
    dma.copy(out, col)
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 128), dt.bfloat16), np.zeros((128, 512), dt.bfloat16))
