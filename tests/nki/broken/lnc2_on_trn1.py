"""An LNC=2 launch on trn1: logical NeuronCores exist from Trn2."""
import numpy as np
from trnsim.errors import LaunchError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=LaunchError, rule="lnc-generation", target="trn1", limit="[1]", value=2,
              deferred=True)


def body(a):  # ERR
    out = ndarray((128, 64), dt.float32, shared_hbm, "out", conv=NEW)
    t = ndarray((128, 64), dt.float32, sbuf, "t", conv=NEW)
    dma.copy(t, a)
    dma.copy(out, t)
    return out


KERNEL = Kernel(body, api="new")[2]


def args():
    return (np.zeros((128, 64), np.float32),)
