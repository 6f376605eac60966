"""Set-up shared by the in-kernel collective tests (tests/nki/test_nki_collectives.py and
tests/timing/test_collective_timing.py): HBM tensors and the staging copy a collective needs.
Imported by module name: the root conftest puts ``tests/`` on ``sys.path``."""
import trnsim.frontends.nki as nki

nisa, nl = nki.isa, nki.language


def hbm(shape, dtype, name=None):
    """A kernel-local ``shared_hbm`` tensor."""
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm, name=name)


def stage(inp, dst_shape):
    """src (a copy of the input: collectives cannot touch the kernel's I/O tensors), dst, out."""
    src, dst = hbm(inp.shape, inp.dtype, "src"), hbm(dst_shape, inp.dtype, "dst")
    nisa.dma_copy(dst=src, src=inp)
    return src, dst, hbm(dst_shape, inp.dtype)
