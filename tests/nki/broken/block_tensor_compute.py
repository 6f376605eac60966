"""A block tensor (4 tiles of 128 x 64) passed whole to a compute op instead of one block."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from trnsim.errors import IndexingError

EXPECT = dict(error=IndexingError, rule="err_failed_to_infer_tile_from_local_tensor",
              limit="a tile (partition dim first)", value="(4, 128, 64)")


@nki.jit
def kernel(x):
    out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        blocks[i] = nl.load(x[i])
    e = nl.exp(blocks)  # ERR
    for i in nl.affine_range(4):
        nl.store(out[i], value=e[i])
    return out


def args():
    return (np.zeros((4, 128, 64), np.float32),)
