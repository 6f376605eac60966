"""A 64 GiB shared_hbm output; a trn2 NeuronCore's share of HBM is 12 GiB."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import CapacityError

EXPECT = dict(error=CapacityError, rule="hbm-capacity", limit=" B per NeuronCore",
              value="68719476736 B")


@nki.jit
def kernel(x):
    huge = nl.ndarray((1 << 20, 1 << 14), dtype=nl.float32, buffer=nl.shared_hbm)  # ERR
    nl.store(huge[0:128, 0:64], value=nl.load(x))
    return huge


def args():
    return (np.zeros((128, 64), np.float32),)
