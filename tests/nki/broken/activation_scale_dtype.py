"""An activation scale tile must be fp32; here it is bf16."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="err_activation_scale_invalid_type", limit="float32",
              value="bfloat16")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    scale = nisa.memset((128, 1), 1.5, dtype=nl.bfloat16)
    r = nisa.activation(op=nl.exp, data=t, scale=scale)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
