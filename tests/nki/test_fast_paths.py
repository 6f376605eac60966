"""The functional core's shortcuts give the same answers as the general paths they skip:
reused subscript views, fresh-tile regions built without the dim walk, element-wide init marks."""
import numpy as np
import pytest

import trnsim
import trnsim.compat

trnsim.compat.install()
import ml_dtypes  # noqa: E402
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.errors import IndexingError, UninitializedReadError  # noqa: E402
from trnsim.nki.core.context import _region, fresh_region  # noqa: E402
from trnsim.options import Options  # noqa: E402


def test_repeated_subscripts_reuse_one_view_with_the_right_geometry():
    seen = {}

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            t[i] = nl.load(x[:, i * 256:(i + 1) * 256])
        v1 = t[2, :, 64:128]
        v2 = t[2, :, 64:128]
        seen["same"] = v1 is v2
        seen["other"] = t[1, :, 64:128] is v1
        seen["geometry"] = (v1.shape, v1._off, v1._strides)
        nl.store(out, value=nl.copy(v2))
        return out

    x = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)
    out = k(x)
    np.testing.assert_array_equal(out, x[:, 2 * 256 + 64:2 * 256 + 128])
    assert seen["same"] and not seen["other"]
    # block 2 of 4 blocks of 256 fp32 per partition: byte offset 2*1024 + 64*4
    assert seen["geometry"] == ((128, 64), 2 * 1024 + 64 * 4, (4 * 1024, 4))


def test_a_boolean_index_is_still_an_error_after_the_int_view_is_cached():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=nl.copy(t[:, 1]))  # caches the view for (slice, 1)
        t[:, True]                              # True == 1 and hashes equal: must not hit it
        return out

    with pytest.raises(IndexingError, match="boolean"):
        k(np.zeros((128, 4), np.float32))


@pytest.mark.parametrize("shape,dtype", [((128, 512), np.float32), ((1, 7), ml_dtypes.bfloat16),
                                         ((64, 3, 5), np.float32), ((32, 1), np.int8),
                                         ((128, 2, 1, 4), ml_dtypes.bfloat16)])
def test_fresh_region_equals_the_general_region(shape, dtype):
    from trnsim.nki.core.storage import Storage
    from trnsim.nki.core.tensor import NkiTensor
    d = np.dtype(dtype)
    free = int(np.prod(shape[1:]))
    st = Storage(memory="sbuf", kind="sbuf", name="t", nbytes=shape[0] * free * d.itemsize,
                 sdtype=d, partitions=shape[0], pstride=free * d.itemsize, full=True)
    strides = np.empty(shape, d).strides
    t = NkiTensor(st, 0, shape, strides, d, 0)
    assert fresh_region(st, shape, d) == _region(t)


def test_partial_bf16_writes_are_tracked_per_element():
    """The init map marks whole elements: a kernel that leaves one bf16 column unwritten still
    reads it as uninitialized, and one that writes every column does not."""
    def make(cols):
        @nki.jit
        def k(x):
            out = nl.ndarray((128, 8), dtype=nl.bfloat16, buffer=nl.shared_hbm)
            t = nl.ndarray((nl.par_dim(128), 8), dtype=nl.bfloat16, buffer=nl.sbuf)
            t[:, 0:cols] = nl.load(x[:, 0:cols])
            nl.store(out, value=nl.copy(t))
            return out
        return k

    x = np.ones((128, 8), ml_dtypes.bfloat16)
    strict = Options(strict=True)
    make(8).run(x, options=strict)  # every element written: no error
    with pytest.raises(UninitializedReadError):
        make(7).run(x, options=strict)


def test_accumulated_matmul_matches_numpy_with_reused_operand_views():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((4, nl.par_dim(128), 128), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((4, nl.par_dim(128), 512), dtype=b.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            sa[i] = nl.load(a[i * 128:(i + 1) * 128, :])
            sb[i] = nl.load(b[i * 128:(i + 1) * 128, :])
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for r in nl.sequential_range(3):    # the same views again on every pass
            for i in nl.affine_range(4):
                acc += nisa.nc_matmul(sa[i], sb[i])
        nl.store(out, value=acc)
        return out

    rng = np.random.default_rng(3)
    a = rng.standard_normal((512, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16)
    got = k(a, b)
    want = 3 * (a.astype(np.float64).T @ b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-3)


def test_a_reused_operand_view_sees_a_write_to_its_tile():
    """The fp32 copy behind matmul operands (and the views cut from it) is dropped on every write:
    the same view object read after the tile is reloaded gives the new values."""
    @nki.jit
    def k(a1, a2, b):
        out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((2, nl.par_dim(128), 128), dtype=a1.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((nl.par_dim(128), 128), dtype=b.dtype, buffer=nl.sbuf)
        sb[...] = nl.load(b)
        sa[1] = nl.load(a1)
        for r in nl.sequential_range(2):
            if r == 1:
                sa[1] = nl.load(a2)  # the same tile, new values
            p = nisa.nc_matmul(sa[1], sb)  # sa[1] is the same cached view both times
            nl.store(out[r], value=nl.copy(p))
        return out

    rng = np.random.default_rng(5)
    a1, a2, b = (rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16) for _ in range(3))
    got = k(a1, a2, b)
    f = np.float64
    np.testing.assert_allclose(got[0], a1.astype(f).T @ b.astype(f), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], a2.astype(f).T @ b.astype(f), rtol=1e-4, atol=1e-3)


def test_outputs_are_handed_out_without_aliasing_each_other():
    """Outputs are the kernel's own buffers (no copy), but two results that share a storage are
    separate arrays, and an input converted on the way in is not the caller's array."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out, out

    x = np.arange(512, dtype=np.float64).reshape(128, 4)  # converted to fp32 on the way in
    a, b = k(x)
    np.testing.assert_array_equal(a, x.astype(np.float32))
    a[...] = -1.0
    np.testing.assert_array_equal(b, x.astype(np.float32))
    assert x[0, 1] == 1.0
