"""Zero false alarms: correct kernels run in strict mode (uninitialized reads are errors) with every
warning turned into an error, raise nothing, and compute what numpy computes.

Covers the built-in examples, the kernels of test_basics.py, and kernels that lean on the checks
most likely to misfire: masks over tails and gathers, manual allocation with intended block reuse,
PSUM accumulation, capacity close to the limits, trace sub-kernels, SPMD grids, partial writes.
"""
import warnings

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import TrnsimError
import trnsim.frontends.nki_legacy as nki
from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.alloc import ndarray as _ndarray, psum as _psum, sbuf as _sbuf, \
    shared_hbm as _shared_hbm
from trnsim.nki.harness import Kernel, as_kernel
from trnsim.frontends.nki_legacy import compiler as ncc
from trnsim.frontends.nki_legacy import isa as nisa
from trnsim.frontends.nki_legacy import language as nl
from trnsim.frontends.nki_legacy import typing as nt
from trnsim.frontends.common import program_id
from trnsim.nki.ops import dma as _dma, elementwise as _ew, reduce as _red, sync as _sync, \
    matmul as _te
from trnsim.options import Options
from trnsim.nki.core.conventions import PRESETS
NEW = PRESETS["new"]


def strict_run(kernel, *args, target="trn2"):
    """Run in strict mode with all warnings as errors; return the outputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            res = as_kernel(kernel).run(*args, options=Options(target=target, strict=True))
        except TrnsimError as e:  # pragma: no cover - what this file guards against
            pytest.fail(f"false alarm on a correct kernel: {type(e).__name__}: {e}")
    return res.outputs


rng = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


# -- built-in examples --------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("K,M,N,dtype", [(256, 128, 512, ml_dtypes.bfloat16),
                                        (384, 256, 1024, np.float32)])


def test_example_matmul_tiled(K, M, N, dtype, target):
    from trnsim.examples.matmul import matmul_tiled
    a, b = randn(K, M, dtype=dtype), randn(K, N, dtype=dtype)
    got = strict_run(matmul_tiled, a, b, target=target).astype(np.float32)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


# -- the kernels of test_basics.py ------------------------------------------------------------

@nki.jit
def elementwise_activation_reduce(x, y):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    s = nisa.activation(nl.exp, nl.multiply(a, b), scale=0.5, bias=None)
    r = nisa.tensor_reduce(nl.add, s, axis=(1,))
    nl.store(out, value=r)
    return out


@nki.jit
def masked_affine_select(x):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:128]
    t = nl.load(x)
    s = nisa.affine_select(pred=(ip >= jf), on_true_tile=t, on_false_value=-1.0)
    nl.store(out, value=s)
    return out


@nki.jit
def spmd_program_ids(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    t = nl.load(x[i, j])
    nl.store(out[i, j], value=t + float(10 * i + j))
    return out


@nki.jit
def masked_tail_load(x):
    """test_basics' masked tail, with an output exactly as large as what the mask keeps (its
    (128, 8) output there leaves 92 rows unwritten: strict mode rightly reports that)."""
    out = nl.ndarray((36, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.arange(128)[:, None]
    j = nl.arange(8)[None, :]
    t = nl.load(x[i + 64, j], mask=(i + 64 < 100))
    nl.store(out[i, j], value=t, mask=(i + 64 < 100))
    return out


def test_basics_kernels_strict():
    x, y = randn(128, 64), randn(128, 64)
    got = strict_run(elementwise_activation_reduce, x, y)
    np.testing.assert_allclose(got, np.exp(x * y * np.float32(0.5)).sum(1, keepdims=True), rtol=1e-5)

    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    np.testing.assert_array_equal(strict_run(masked_affine_select, x),
                                  np.where(np.tri(128, dtype=bool), x, -1.0))

    x = np.zeros((2, 3, 128, 4), np.float32)
    got = strict_run(spmd_program_ids[2, 3], x)
    ref = (10 * np.arange(2)[:, None] + np.arange(3)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(got, np.broadcast_to(ref[:, :, None, None], x.shape))

    x = np.arange(100 * 8, dtype=np.float32).reshape(100, 8)
    got = strict_run(masked_tail_load, x)
    np.testing.assert_array_equal(got, x[64:100])


# -- masks --------------------------------------------------------------------------------------

@nki.jit
def masked_rows(x):
    """Rows past N are masked off in the load, the compute and the store."""
    N, F = x.shape
    out = nl.ndarray((N, F), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range((N + 127) // 128):
        rows = t * 128 + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < N))
        y = nl.multiply(tile, 3.0, mask=(rows < N))
        z = nl.add(y, tile, mask=(rows < N) & (i_f < F))
        nl.store(out[rows, i_f], value=z, mask=(rows < N))
    return out


@nki.jit
def masked_gather(x):
    """An index tile gathers even rows; rows that would fall past the tensor are masked off."""
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    rows = nisa.iota(i_p * 2, dtype=nl.int32)
    t = nl.load(x[rows, i_f], mask=(i_p < 64))
    nl.store(out[i_p, i_f], value=t, mask=(i_p < 64))
    nl.store(out[i_p, i_f], value=nl.zeros((128, 64), nl.float32, buffer=nl.sbuf), mask=(i_p >= 64))
    return out


def test_masks():
    x = randn(300, 96)
    np.testing.assert_allclose(strict_run(masked_rows, x), 4 * x, rtol=1e-6)
    x = randn(128, 64)
    got = strict_run(masked_gather, x)
    np.testing.assert_array_equal(got[:64], x[0:128:2])
    np.testing.assert_array_equal(got[64:], 0)


# -- manual allocation with intended block reuse -------------------------------------------------

@nki.jit
def double_buffered(x):
    """Blocks i and i + 2 share a physical tile (mod_alloc with 2 tiles): each block is consumed
    before its tile is reused, so nothing is clobbered while live."""
    n = x.shape[0]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    inp = nl.ndarray((n, nl.par_dim(128), 256), dtype=nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    res = nl.ndarray((n, nl.par_dim(128), 256), dtype=nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=2 * 256 * 4, num_free_tiles=(2,)))
    for i in nl.affine_range(n):
        inp[i] = nl.load(x[i])
        res[i] = nl.exp(inp[i])
        nl.store(out[i], value=res[i])
    return out


@nki.jit
def psum_bank_reuse(a, b):
    """Output tiles (n) accumulate over K in PSUM tiles placed round-robin in 2 banks."""
    K, M = a.shape
    _, N = b.shape
    nk, nn = K // 128, N // 512
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((nn, nl.par_dim(M), 512), dtype=nl.float32,
                     buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)))
    for n in nl.affine_range(nn):
        for k in nl.sequential_range(nk):
            lhs = nl.load(a[k * 128:(k + 1) * 128, :])
            rhs = nl.load(b[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
            acc[n] += nisa.nc_matmul(lhs, rhs)
        res = nl.copy(acc[n], dtype=nl.float32)
        nl.store(out[:, n * 512:(n + 1) * 512], value=res)
    return out


@nki.jit
def callback_alloc(x, y):
    """sbuf.alloc with a callback placing two blocks side by side (disjoint bytes)."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)

    def place(idx, pdim_size, fdim_size):
        return 0, idx[0] * fdim_size

    t = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=ncc.sbuf.alloc(place))
    t[0] = nl.load(x)
    t[1] = nl.load(y)
    nl.store(out, value=nl.subtract(t[0], t[1]))
    return out


@nki.jit
def psum_bank_handoff(a, b):
    """A second tensor placed in the bank of a first one that is dead by then: its first += starts
    a new accumulation group (the allocated-attention kernel's pattern)."""
    out1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    lhs0 = nl.load(a[0:128, :])
    rhs0 = nl.load(b[0:128, :])
    first = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=1))
    first[...] = nisa.nc_matmul(lhs0, rhs0)
    nl.store(out1, value=nl.copy(first))
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=1))
    for k in nl.affine_range(a.shape[0] // 128):
        acc += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]),
                              nl.load(b[k * 128:(k + 1) * 128, :]))
    nl.store(out2, value=nl.copy(acc))
    return out1, out2


def test_manual_allocation_reuse():
    a, b = randn(384, 128), randn(384, 512)
    o1, o2 = strict_run(psum_bank_handoff, a, b)
    np.testing.assert_allclose(o1, a[:128].T @ b[:128], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(o2, a.T @ b, rtol=1e-4, atol=1e-4)
    x = randn(6, 128, 256)
    np.testing.assert_allclose(strict_run(double_buffered, x), np.exp(x), rtol=1e-6)
    a, b = randn(256, 128), randn(256, 2048)
    np.testing.assert_allclose(strict_run(psum_bank_reuse, a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    x, y = randn(128, 64), randn(128, 64)
    np.testing.assert_array_equal(strict_run(callback_alloc, x, y), x - y)


# -- PSUM accumulation and the Tensor engine ----------------------------------------------------

@nki.jit
def psum_accumulate(a, b):
    K, M = a.shape
    out = nl.ndarray((M, b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]),
                              nl.load(b[k * 128:(k + 1) * 128, :]))
    nl.store(out, value=acc)  # PSUM is staged through SBUF by the compiler
    return out


@nki.jit
def transposes(x, y):
    """PE transpose (nl.transpose), Vector 32x32 transpose, DMA transpose and nl.matmul."""
    out1 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    out3 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    out4 = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out1, value=nl.transpose(t))
    small = nl.load(x[0:32, 0:32])
    nl.store(out2, value=nisa.nc_transpose(small, engine=nisa.vector_engine))
    nl.store(out3, value=nl.load_transpose2d(x))
    w = nl.load(y)
    nl.store(out4, value=nl.matmul(t, w, transpose_x=True))
    return out1, out2, out3, out4


def test_psum_accumulation_and_transposes():
    a, b = randn(512, 128), randn(512, 256)
    np.testing.assert_allclose(strict_run(psum_accumulate, a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    x, y = randn(128, 64), randn(128, 64)
    o1, o2, o3, o4 = strict_run(transposes, x, y)
    np.testing.assert_array_equal(o1, x.T)
    np.testing.assert_array_equal(o2, x[:32, :32].T)
    np.testing.assert_array_equal(o3, x.T)
    np.testing.assert_allclose(o4, x.T @ y, rtol=1e-4, atol=1e-4)


# -- capacity close to the limits ----------------------------------------------------------------

@nki.jit
def near_capacity(x, a, b):
    """Three 64 KiB tiles live at once (192 of 224 KiB SBUF) and all 8 PSUM banks in use."""
    out = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t0 = nl.load(x[0])
    t1 = nl.load(x[1])
    t2 = nl.load(x[2])
    nl.store(out, value=nl.add(nl.add(t0, t1), t2))
    lhs = nl.load(a)
    rhs = nl.load(b)
    banks = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
    for p in banks:
        p += nisa.nc_matmul(lhs, rhs)
    acc = nl.copy(banks[0])
    for p in banks[1:]:
        acc = nl.add(acc, p)
    nl.store(out2, value=acc)
    return out, out2


def test_capacity_close_to_limits_is_fine():
    x = randn(3, 128, 16384)
    a, b = randn(128, 128), randn(128, 512)
    o1, o2 = strict_run(near_capacity, x, a, b)
    np.testing.assert_allclose(o1, x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(o2, 8 * (a.T @ b), rtol=1e-4, atol=1e-3)


# -- trace sub-kernels and SPMD grids -------------------------------------------------------------

@nki.trace
def scale_tile(t, factor):
    return nl.multiply(t, factor)


@nki.jit(mode="trace")
def store_rowsum(t, out_slice):
    nl.store(out_slice, value=nisa.tensor_reduce(nl.add, t, axis=(1,)))


@nki.jit
def with_subkernels(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    store_rowsum(scale_tile(t, 2.0), out)
    return out


@nki.jit
def grid_blocks(x):
    """One (128, 64) block per instance of a 2 x 2 grid; together they write every element."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    assert nl.num_programs() == 4 and nl.program_ndim() == 2
    rows = slice(i * 128, (i + 1) * 128)
    cols = slice(j * 64, (j + 1) * 64)
    t = nl.load(x[rows, cols])
    nl.store(out[rows, cols], value=nl.exp(t))
    return out


def test_subkernels_and_grids():
    x = randn(128, 48)
    np.testing.assert_allclose(strict_run(with_subkernels, x), 2 * x.sum(1, keepdims=True),
                               rtol=1e-5)
    x = randn(256, 128)
    np.testing.assert_allclose(strict_run(grid_blocks[2, 2], x), np.exp(x), rtol=1e-6)


# -- partial writes, aligned partition slices, mutable inputs, softmax ----------------------------

@nki.jit
def partial_tile(x):
    """Only the written half of a tile reaches the output."""
    out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(x[0:64, :])
    nl.store(out, value=nl.exp(t[0:64, :]))
    return out


@nki.jit
def aligned_slices(x):
    """Compute ops on partition slices that start on their alignment (0/32/64/96, 0/64)."""
    out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
    r[0:32, :] = nl.exp(t[0:32, :])
    r[32:64, :] = nl.multiply(t[32:64, :], 2.0)
    r[64:128, :] = nl.add(t[64:128, :], 1.0)
    nl.store(out, value=r)
    return out


@nki.jit
def update_in_place(x: nt.mutable_tensor, y):
    t = nl.load(x)
    nl.store(x, value=nl.add(t, nl.load(y)))
    return x


@nki.jit
def softmax_rows(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    neg_max = nisa.tensor_reduce(nl.max, t, axis=(1,), negate=True)
    e = nisa.activation(nl.exp, t, bias=neg_max, scale=1.0)
    s = nisa.tensor_reduce(nl.add, e, axis=(1,))
    r = nl.reciprocal(s)
    nl.store(out, value=nisa.tensor_scalar(e, nl.multiply, r))
    return out


@nki.jit
def sbuf_accumulate(x):
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0]):
        acc += nl.load(x[i])
    nl.store(out, value=acc)
    return out


def test_partial_writes_alignment_mutable_and_more():
    x = randn(128, 32)
    np.testing.assert_allclose(strict_run(partial_tile, x), np.exp(x[:64]), rtol=1e-6)
    x = randn(128, 16)
    ref = np.concatenate([np.exp(x[:32]), 2 * x[32:64], x[64:] + 1])
    np.testing.assert_allclose(strict_run(aligned_slices, x), ref, rtol=1e-6)
    x, y = randn(128, 8), randn(128, 8)
    x0 = x.copy()
    strict_run(update_in_place, x, y)
    np.testing.assert_allclose(x, x0 + y, rtol=1e-6)
    x = randn(128, 100)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(strict_run(softmax_rows, x), e / e.sum(1, keepdims=True), rtol=1e-5)
    x = randn(5, 128, 64)
    np.testing.assert_allclose(strict_run(sbuf_accumulate, x), x.sum(0), rtol=1e-5, atol=1e-6)


# -- the op layer with new-API (dst=) calls -------------------------------------------------------

def new_api_matmul(a, b):
    """nc_matmul accumulating twice into PSUM (first write overwrites), a Vector copy out of PSUM,
    a GpSimd partition reduce on SBUF."""
    K, M = a.shape
    out = _ndarray((M, 512), dt.float32, _shared_hbm, "out", conv=NEW)
    col = _ndarray((1, 512), dt.float32, _shared_hbm, "col", conv=NEW)
    acc = _ndarray((M, 512), dt.float32, _psum, "acc", conv=NEW)
    for k in range(K // 128):
        s = _ndarray((128, M), dt.float32, _sbuf, "s", conv=NEW)
        m = _ndarray((128, 512), dt.float32, _sbuf, "m", conv=NEW)
        _dma.copy(s, a[k * 128:(k + 1) * 128, :])
        _dma.copy(m, b[k * 128:(k + 1) * 128, :])
        _te.nc_matmul(acc, s, m)
    res = _ndarray((M, 512), dt.float32, _sbuf, "res", conv=NEW)
    _ew.tensor_copy(res, acc)
    _dma.copy(out, res)
    red = _ndarray((1, 512), dt.float32, _sbuf, "red", conv=NEW)
    _red.partition_reduce(red, "add", res)
    _dma.copy(col, red)
    return out, col


def test_op_layer_new_api():
    a, b = randn(256, 128), randn(256, 512)
    out, col = strict_run(Kernel(new_api_matmul, api="new"), a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(col, (a.T @ b).sum(0, keepdims=True), rtol=1e-3, atol=1e-3)


def lnc_halves(x):
    """LNC=2: each logical core writes its half of the shared output (checked once both are done)."""
    R, F = x.shape
    half = R // 2
    out = _ndarray((R, F), dt.float32, _shared_hbm, "out", conv=NEW)
    c = program_id(0)
    t = _ndarray((half, F), dt.float32, _sbuf, "t", conv=NEW)
    _dma.copy(t, x[c * half:(c + 1) * half, :])
    _ew.tensor_scalar(t, t, "multiply", 2.0)
    _dma.copy(out[c * half:(c + 1) * half, :], t)
    _sync.core_barrier()
    return out


def test_lnc2_outputs_written_by_both_cores():
    x = randn(128, 32)
    for _ in range(3):  # the cores are threads: repeat to shake out ordering
        np.testing.assert_array_equal(strict_run(Kernel(lnc_halves, api="new")[2], x), 2 * x)
