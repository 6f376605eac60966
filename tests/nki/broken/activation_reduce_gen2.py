"""activation_reduce with a max reduction on trn1: NeuronCore-v2 accumulates only with add."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import GenerationError

EXPECT = dict(error=GenerationError, rule="generation", target="trn1", limit="gen3+", value="gen2")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    e = nisa.activation_reduce(op=nl.exp, data=t, reduce_op=nl.max, reduce_res=red)  # ERR
    nl.store(out, value=red)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
