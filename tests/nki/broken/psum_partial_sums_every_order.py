"""Nine PSUM accumulators that every instruction order must hold at once: step 0 writes all nine,
their sum (read from all nine) is the moving input of step 1, which accumulates into the same
nine.  Hoisting each evacuation (cores.toml [v3.psum] liveness) does not help: 9 x 2 KiB per
partition against 8 banks of 2 KiB."""
import numpy as np
import trnsim.frontends.nki as nki
from trnsim.errors import CapacityError

nl = nki.language
nisa = nki.isa

EXPECT = dict(error=CapacityError, rule="psum-capacity", limit="16384 B per partition",
              value="18432 B per partition", deferred=True)


@nki.jit
def kernel(w, x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ws = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    x0 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x0, src=x)
    acc = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]  # ERR
    for a in acc:
        nisa.nc_matmul(dst=a, stationary=ws, moving=x0)
    s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=acc[0])
    for a in acc[1:]:
        nisa.tensor_tensor(dst=s, data1=s, data2=a, op=nl.add)
    for a in acc:
        nisa.nc_matmul(dst=a, stationary=ws, moving=s)
    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc[0])
    for a in acc[1:]:
        nisa.tensor_tensor(dst=r, data1=r, data2=a, op=nl.add)
    nisa.dma_copy(dst=out, src=r)
    return out


def args():
    return (np.ones((128, 128), np.float32), np.ones((128, 512), np.float32))
