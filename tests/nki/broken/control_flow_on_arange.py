"""Python control flow on an index expression: its values exist only per element, at run time."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_control_flow_condition_depending_on_arange",
              limit="compile-time Python values only", value="< 64")


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f])
    if i_p < 64:  # ERR
        t = nl.exp(t)
    nl.store(out[i_p, i_f], value=t)
    return out


def args():
    return (np.zeros((128, 64), np.float32),)
