"""core_barrier synchronizes the two logical cores of an LNC=2 NeuronCore (Trn2 and later)."""
import numpy as np
from trnsim.errors import GenerationError
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray, sbuf, shared_hbm
from trnsim.nki.harness import Kernel
from trnsim.nki.ops import dma, sync
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]

EXPECT = dict(error=GenerationError, rule="generation", target="trn1", limit="gen3+",
              value="gen2")


def body(a):
    out = ndarray((128, 64), dt.float32, shared_hbm, "out", conv=NEW)
    t = ndarray((128, 64), dt.float32, sbuf, "t", conv=NEW)
    dma.copy(t, a)
    sync.core_barrier()  # ERR
    dma.copy(out, t)
    return out


KERNEL = Kernel(body, api="new")


def args():
    return (np.zeros((128, 64), np.float32),)
