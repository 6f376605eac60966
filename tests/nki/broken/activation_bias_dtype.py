"""An activation bias must be an fp32/fp16/bf16 (P, 1) vector; here it is int8."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import DtypeError

EXPECT = dict(error=DtypeError, rule="err_activation_bias_invalid_type",
              limit="float32/float16/bfloat16", value="int8")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    bias = nisa.memset((128, 1), 1, dtype=nl.int8)
    r = nisa.activation(op=nl.exp, data=t, bias=bias)  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
