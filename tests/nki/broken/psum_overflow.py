"""Nine full-bank (2 KiB per partition) PSUM tiles live at once; PSUM has 8 banks (16 KiB)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="psum-capacity", limit="16384 B per partition",
              value="18432 B per partition", deferred=True)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    banks = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
    extra = nl.zeros((128, 512), nl.float32, buffer=nl.psum)  # ERR
    acc = nl.copy(extra)
    for b in banks:
        acc = nl.add(acc, b)
    nl.store(out, value=acc)
    return out


def args():
    return (np.zeros((128, 512), np.float32),)
