"""A kernel output that the kernel never writes (legacy err_tensor_output_not_written_to)."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import UninitializedReadError, UninitializedReadWarning

EXPECT = [
    dict(warning=UninitializedReadWarning, rule="err_tensor_output_not_written_to",
         value="8192 of 8192 elements"),
    dict(error=UninitializedReadError, rule="err_tensor_output_not_written_to", strict=True,
         deferred=True),
]


@nki.jit
def kernel(x):
    result = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)  # ERR
    t = nl.load(x)
    nl.exp(t)
    return result


def args():
    return (np.zeros((128, 64), np.float32),)
