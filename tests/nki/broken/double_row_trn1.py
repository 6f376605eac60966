"""perf_mode double_row (fp8, K = 256 per pass) exists from NeuronCore-v3; trn1 is v2."""
import ml_dtypes
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from trnsim.errors import GenerationError

EXPECT = dict(error=GenerationError, rule="generation", target="trn1",
              limit="gen3+", value="gen2")


@nki.jit
def kernel(s, m):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(s)
    mv = nl.load(m)
    r = nisa.nc_matmul(st, mv, perf_mode="double_row")  # ERR
    nl.store(out, value=r)
    return out


def args():
    return (np.zeros((128, 2, 64), ml_dtypes.float8_e4m3), np.zeros((128, 2, 512), ml_dtypes.float8_e4m3))
