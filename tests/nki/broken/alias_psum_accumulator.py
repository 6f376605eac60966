"""Two PSUM accumulators placed in the same bank: the second one's sums overwrite the first while
the first is still accumulating, so its next += would add onto the wrong partial sums."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import AliasError

EXPECT = dict(error=AliasError, rule="manual-allocation-alias", limit="owned by 'acc1'",
              value="'acc2' wrote partition 0, byte 6144")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    bank3 = ncc.psum.mod_alloc(base_bank=3)
    acc1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=bank3, name="acc1")
    acc2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=bank3, name="acc2")
    acc1 += nisa.nc_matmul(st, mv)
    acc2 += nisa.nc_matmul(st, mv)
    acc1 += nisa.nc_matmul(st, mv)  # ERR
    nl.store(out, value=nl.add(acc1, acc2))
    return out


def args():
    return (np.ones((128, 128), ml_dtypes.bfloat16), np.ones((128, 512), ml_dtypes.bfloat16))
