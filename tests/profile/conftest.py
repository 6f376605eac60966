"""Shared estimates for the profile tests: the example tiled matmul on trn2, and a hand-counted
three-instruction kernel on trn1."""
import ml_dtypes
import numpy as np
import pytest

from trnsim.options import Options


@pytest.fixture(scope="module")
def matmul():
    """The built-in tiled matmul example, [256,256] x [256,1024] bf16 on trn2."""
    import trnsim.compat
    trnsim.compat.install()
    from trnsim.examples.matmul import matmul_tiled
    from trnsim.timing import estimate_run
    a = np.ones((256, 256), dtype=ml_dtypes.bfloat16)
    b = np.ones((256, 1024), dtype=ml_dtypes.bfloat16)
    return estimate_run(matmul_tiled.run(a, b, options=Options(target="trn2")))


@pytest.fixture(scope="module")
def double():
    """Three instructions on three lines: load a 128 x 2048 bf16 tile, multiply by 2, store."""
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    from trnsim.timing import estimate_run

    @nki.jit
    def double_it(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        y = nl.multiply(t, 2.0)
        nl.store(out, value=y)
        return out
    x = np.ones((128, 2048), dtype=ml_dtypes.bfloat16)
    return estimate_run(double_it.run(x, options=Options(target="trn1")))
