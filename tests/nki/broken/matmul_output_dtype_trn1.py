"""New-API nc_matmul into a bf16 PSUM tile on trn1, whose Tensor engine writes fp32 only.

Written against trnsim's op layer (``dst=`` style, as the new ``nki.isa`` calls it)."""
import numpy as np
from trnsim.errors import DtypeError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, psum, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, matmul
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=DtypeError, rule="matmul-output-dtype", target="trn1", limit="float32",
              value="bfloat16")


def body(a, b):
    out = ndarray((128, 512), dt.float32, shared_hbm, "out", conv=NEW)
    s = ndarray((128, 128), dt.bfloat16, sbuf, "s", conv=NEW)
    m = ndarray((128, 512), dt.bfloat16, sbuf, "m", conv=NEW)
    dma.copy(s, a)
    dma.copy(m, b)
    acc = ndarray((128, 512), dt.bfloat16, psum, "acc", conv=NEW)
    matmul.nc_matmul(acc, s, m)  # ERR
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 128), dt.bfloat16), np.zeros((128, 512), dt.bfloat16))
