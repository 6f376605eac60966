"""Four 64 KiB-per-partition tiles live at once need 256 KiB of the 224 KiB SBUF partition (trn2).

Checked with compiler-style liveness when the kernel ends: each tile is live from the load that
produces it to its last read, so all four overlap at the fourth load, which gets the blame."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="sbuf-capacity", limit="229376 B per partition",
              value="262144 B per partition", deferred=True)


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0])
    b = nl.load(x[1])
    c = nl.load(x[2])
    d = nl.load(x[3])  # ERR
    s = nl.add(nl.add(a, b), nl.add(c, d))
    nl.store(out, value=s)
    return out


def args():
    return (np.ones((4, 128, 16384), np.float32),)
