"""The new-generation ``nki`` API (NKI >= 0.2): kernels written with dst-first ``nki.isa`` calls,
checked against numpy computed in the test."""
import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import (DtypeError, KernelError, LaunchError, MemoryAccessError, TrnsimError,
                           UnsupportedError)
import trnsim.frontends.nki as nki

nl = nki.language
nisa = nki.isa


def _rng(seed=0):
    return np.random.default_rng(seed)


# -- imports and launch ----------------------------------------------------------------------

def test_public_module_names_resolve_under_compat():
    import trnsim.compat
    trnsim.compat.install()
    import importlib
    for name in ("nki", "nki.language", "nki.isa", "nki.isa.constants", "nki.typing",
                 "nki.compiler", "nki.collectives", "nki.tensor", "nki.dtype",
                 "nki_cpu_simulator.nki.builtin", "nki_cpu_simulator.nki.language.dtypes"):
        importlib.import_module(name)
    from nki.isa.constants import dge_mode, oob_mode
    import nki as pub
    assert pub is nki and pub.isa.dge_mode is dge_mode
    assert (dge_mode.unknown, dge_mode.swdge, dge_mode.hwdge, dge_mode.none) == (0, 1, 2, 3)
    assert oob_mode.skip == 1
    e = nisa.engine
    assert (e.unknown, e.tensor, e.scalar, e.gpsimd, e.dma, e.vector, e.sync) == tuple(range(7))
    assert [c.name for c in nisa.reduce_cmd] == ["idle", "reset", "reduce", "reset_reduce",
                                                 "load_reduce"]
    from trnsim.frontends.common import tile_size
    assert nl.tile_size is tile_size and nl.tile_size.pmax == 128
    assert issubclass(nisa.NkiValidationError, KernelError)
    assert np.zeros(3, dtype=nl.bfloat16).dtype == ml_dtypes.bfloat16
    assert nl.float8_e4m3fn == ml_dtypes.float8_e4m3fn and nl.bool == np.bool_


@nki.jit
def _tiled_matmul(a, b):
    """a: (K, M) (stationary, already transposed), b: (K, N); K tiled by 128."""
    K, M = a.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in range(K // 128):
        at = nl.ndarray((128, M), dtype=a.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=bt, src=b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=ps, stationary=at, moving=bt)  # accumulate=None
    sb = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    nisa.dma_copy(dst=out, src=sb)
    return out


def test_matmul_accumulate_none_overwrites_fresh_psum_then_adds():
    rng = _rng(1)
    a = rng.standard_normal((384, 96)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((384, 200)).astype(ml_dtypes.bfloat16)
    got = nki.simulate(_tiled_matmul)(a, b)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    # fresh PSUM holds NaN sentinels: the first write must overwrite them, later ones add
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    # cpu_simulate(...)[lnc](**kwargs), the nki-library harness call
    got2 = nki.cpu_simulate(_tiled_matmul)[1](a=a, b=b)
    np.testing.assert_array_equal(got2, got)


def test_matmul_accumulate_true_and_false_force_add_and_overwrite():
    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        bt = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        ps = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=ps, value=5.0)
        nisa.nc_matmul(ps, at, bt, accumulate=True)          # 5 + a.T b
        sb = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        nisa.dma_copy(dst=out[0], src=sb)
        nisa.nc_matmul(ps, at, bt, accumulate=False)         # a.T b
        nisa.nc_matmul(ps, at, bt)                           # + a.T b (already written)
        nisa.tensor_copy(dst=sb, src=ps)
        nisa.dma_copy(dst=out[1], src=sb)
        return out

    rng = _rng(2)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 32)).astype(np.float32)
    got = k(a, b)
    ref = a.T.astype(np.float64) @ b
    np.testing.assert_allclose(got[0], 5 + ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], 2 * ref, rtol=1e-5, atol=1e-4)


def test_isa_calls_return_instruction_handles_with_depends_on():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        i1 = nisa.dma_copy(dst=t, src=x)
        i2 = nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0, op1=nl.add,
                                operand1=1.0)
        assert isinstance(i1, nisa.NkiInstruction) and i2.index == i1.index + 1
        assert i2.depends_on(i1) is i2
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(k(x), x * 3 + 1)


def test_inputs_written_by_the_kernel_are_copied_back():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=x, src=t)
        return x

    x = np.zeros((4, 8), np.float32)
    out = nki.simulate(k)(x)
    np.testing.assert_array_equal(x, np.ones((4, 8)))
    np.testing.assert_array_equal(out, x)


def test_plain_functions_and_platform_target():
    def k(x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=int(nisa.get_nc_version()))
        nisa.dma_copy(dst=out, src=t)
        return out

    assert nki.simulate(k)(np.zeros(1, np.float32))[0, 0] == 3  # trn2 default
    k1 = nki.jit(k, platform_target="trn1")
    assert nki.simulate(k1)(np.zeros(1, np.float32))[0, 0] == 2
    k3 = nki.jit(platform_target="trn3")(k)
    assert k3(np.zeros(1, np.float32))[0, 0] == 4


# -- rejected legacy constructs ----------------------------------------------------------------

def _run(body, *args):
    @nki.jit
    def k(x):
        return body(x)
    return k(*args)


def test_hbm_kernel_output_is_rejected():
    def body(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    with pytest.raises(LaunchError, match="shared_hbm") as ei:
        _run(body, np.zeros((4, 4), np.float32))
    assert ei.value.rule == "kernel-output-shared-hbm" and ei.value.value == "nl.hbm"


def test_mask_keyword_string_buffers_and_foreign_enums_are_rejected():
    x = np.zeros((4, 4), np.float32)

    def mask_body(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, mask=None)
        return x

    with pytest.raises(nisa.NkiValidationError, match="mask= was removed") as ei:
        _run(mask_body, x)
    assert ei.value.rule == "new-api-mask"

    with pytest.raises(KernelError, match="not strings") as ei:
        _run(lambda x: nl.ndarray((4, 4), nl.float32, buffer="sbuf"), x)
    assert ei.value.rule == "buffer-type" and ei.value.value == "sbuf"

    def legacy_enum(x):
        import neuronxcc.nki.isa as legacy_isa  # legacy numbering: none=0 ... unknown=3
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=legacy_isa.dge_mode.hwdge)
        return x

    import trnsim.compat
    trnsim.compat.install()
    with pytest.raises(nisa.NkiValidationError, match="must be a nki.isa.dge_mode member") as ei:
        _run(legacy_enum, x)
    assert ei.value.rule == "new-api-enum"

    def bad_int(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=7)
        return x

    with pytest.raises(nisa.NkiValidationError, match="integer 7") as ei:
        _run(bad_int, x)
    assert ei.value.rule == "new-api-enum" and ei.value.value == "7"

    @nki.jit
    def int_member(x):  # nki-library passes dge_mode=3 (none) as a plain integer
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=3)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(int_member(x + 1), x + 1)

    with pytest.raises(nisa.NkiValidationError, match="mask="):
        _run(lambda x: nl.exp(nl.load(x), mask=None), x)


def test_memset_value_must_match_the_dtype():
    def int_with_float(x):
        t = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.5)
        return x

    with pytest.raises(nisa.NkiValidationError, match="integer value") as ei:
        _run(int_with_float, np.zeros((4, 4), np.float32))
    assert ei.value.rule == "memset-value-dtype" and ei.value.value == "1.5"

    def packed(x):
        t = nl.ndarray((4, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        return x

    with pytest.raises(nisa.NkiValidationError, match="only value=0") as ei:  # MX types: gen4
        nki.jit(lambda x: packed(x), platform_target="trn3")(np.zeros((4, 4), np.float32))
    assert ei.value.rule == "memset-packed-value"

    @nki.jit
    def ok(x):
        out = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-7)
        f = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=f, value=0)  # an int literal is fine for a float dst
        z = nl.ndarray((4, 4), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)  # nki-library zero-fills integer tiles with 0.0
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(ok(np.zeros(1, np.float32)), np.full((4, 4), -7))


def test_dma_rules_psum_source_and_hwdge_dtypes():
    def from_psum(x):
        ps = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=ps, value=0.0)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=ps)
        return out

    with pytest.raises(MemoryAccessError, match="PSUM") as ei:
        _run(from_psum, np.zeros(1, np.float32))
    assert ei.value.rule == "dma-psum-source"

    def hwdge_cast(x):
        t = nl.ndarray((4, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
        return x

    with pytest.raises(DtypeError, match="hardware DGE cannot convert") as ei:
        _run(hwdge_cast, np.zeros((4, 4), np.float32))
    assert ei.value.rule == "hwdge-dtype"

    @nki.jit
    def cast_swdge(x):
        out = nl.ndarray((4, 4), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.swdge)
        nisa.dma_copy(dst=out, src=t, dge_mode=nisa.dge_mode.hwdge)
        return out

    x = _rng(3).standard_normal((4, 4)).astype(np.float32)
    np.testing.assert_array_equal(cast_swdge(x), x.astype(ml_dtypes.bfloat16))


def test_tensor_copy_on_scalar_engine_is_rejected_on_gen2():
    def body(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t, engine=nisa.engine.scalar)
        return x

    k = nki.jit(lambda x: body(x), platform_target="trn1")
    with pytest.raises(TrnsimError, match="tensor_copy.engine.scalar needs NeuronCore-v3") as ei:
        k(np.zeros((4, 4), np.float32))
    assert (ei.value.rule, ei.value.limit, ei.value.value) == ("generation", "gen3+", "gen2")
    nki.jit(lambda x: body(x), platform_target="trn2")(np.zeros((4, 4), np.float32))


# -- LNC=2 --------------------------------------------------------------------------------------

@nki.jit
def _lnc_kernel(x):
    """Each core doubles its half of the rows, the cores swap halves through shared HBM (after a
    barrier) and exchange a row sum with sendrecv."""
    R, F = x.shape
    half = R // 2
    out = nl.ndarray((R, F), dtype=x.dtype, buffer=nl.shared_hbm)
    swapped = nl.ndarray((R, F), dtype=x.dtype, buffer=nl.shared_hbm)
    peer_sum = nl.ndarray((nl.num_programs(), half, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    c = nl.program_id(0)
    t = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[c * half:(c + 1) * half, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[c * half:(c + 1) * half, :], src=t)
    nisa.core_barrier(out, (0, 1))
    other = 1 - c
    u = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=out[other * half:(other + 1) * half, :])
    nisa.dma_copy(dst=swapped[c * half:(c + 1) * half, :], src=u)
    s = nl.ndarray((half, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
    r = nl.ndarray((half, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=s, dst=r, send_to_rank=other, recv_from_rank=other, pipe_id=0)
    nisa.dma_copy(dst=peer_sum[c], src=r)
    return out, swapped, peer_sum


def test_lnc2_program_id_core_barrier_and_sendrecv():
    x = _rng(4).standard_normal((64, 16)).astype(np.float32)
    out, swapped, peer = nki.simulate(_lnc_kernel[2])(x)
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(swapped, np.concatenate([2 * x[32:], 2 * x[:32]]))
    sums = (2 * x).reshape(2, 32, 16).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(peer, sums[::-1], rtol=1e-5)
    # the same kernel through cpu_simulate(k)[2]
    out2, _, _ = nki.cpu_simulate(_lnc_kernel)[2](x=x)
    np.testing.assert_array_equal(out2, out)


def test_lnc_degree_must_be_1_or_2():
    with pytest.raises(LaunchError, match="1 or 2") as ei:
        _lnc_kernel[4]
    assert ei.value.rule == "lnc-value"


def test_lnc1_program_id_and_num_programs():
    @nki.jit
    def k(x):
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t[:, 0:1], value=nl.program_id(0))
        nisa.memset(dst=t[:, 1:2], value=nl.num_programs())
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(k(np.zeros(1, np.float32)), [[0, 1]])


# -- indexing, views and access patterns -----------------------------------------------------

def test_integer_index_keeps_partition_dim_and_drops_free_dims():
    @nki.jit
    def k(x):
        t = nl.ndarray((8, 4, 6), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        assert t[3].shape == (1, 4, 6)
        assert t[:, 2].shape == (8, 6)
        assert t[:, 2, 5].shape == (8, 1)
        assert t[3, 2, 5].shape == (1, 1)
        assert x[3].shape == (4, 6) and x[3, 2, 5].shape == ()
        out = nl.ndarray((8, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[:, 2])
        return out

    x = np.arange(8 * 4 * 6, dtype=np.float32).reshape(8, 4, 6)
    np.testing.assert_array_equal(k(x), x[:, 2])


def test_view_methods_against_numpy():
    x = np.arange(16 * 24, dtype=np.float32).reshape(16, 24)

    @nki.jit
    def k(x):
        t = nl.ndarray((16, 24), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        outs = []

        def emit(view):
            o = nl.ndarray(view.shape, dtype=view.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=view)
            outs.append(o)

        v = t.reshape_dim(1, (4, 6))
        assert v.shape == (16, 4, 6) and v.is_contiguous()
        emit(v.permute((0, 2, 1)))                              # (16, 6, 4)
        emit(t.slice(1, 2, 20, 3))                              # (16, 6)
        emit(v.select(1, 2))                                    # (16, 6)
        emit(t[:, 0:1].broadcast(1, 5))                         # (16, 5)
        emit(t.expand_dim(1).squeeze_dim(1).flatten_dims(0, 1) if False else
             v.flatten_dims(1, 2))                              # (16, 24)
        emit(t.rearrange(("p", ("h", "w")), ("p", "w", "h"), {"h": 4}))  # (16, 6, 4)
        s = t[:, 0:12]
        assert s.is_contiguous() and s.get_pattern() == [[24, 16], [1, 12]]
        assert t[2:, 4:].offset == 2 * 24 + 4 and t.strides == (24, 1)
        emit(s.reshape((16, 3, 4)))
        return tuple(outs)

    got = k(x)
    v = x.reshape(16, 4, 6)
    refs = [v.transpose(0, 2, 1), x[:, 2:20:3], v[:, 2], np.repeat(x[:, 0:1], 5, axis=1),
            x, v.transpose(0, 2, 1), x[:, 0:12].reshape(16, 3, 4)]
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        np.testing.assert_array_equal(g, r)


def test_view_dtype_reinterprets_the_last_dim():
    @nki.jit
    def k(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = t.view(nl.uint16)
        assert u.shape == (4, 16)
        out = nl.ndarray((4, 16), dtype=nl.uint16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = _rng(5).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x.view(np.uint16))


def test_access_patterns_offsets_and_dtype():
    x = np.arange(32 * 40, dtype=np.float32).reshape(32, 40)

    @nki.jit
    def k(x):
        a = nl.ndarray((8, 5), dtype=x.dtype, buffer=nl.sbuf)
        # rows 0, 4, ..., 28 and every 8th column starting at column 3
        nisa.dma_copy(dst=a, src=x.ap([[160, 8], [8, 5]], offset=3))
        # a view's .ap offset composes with the view's own start
        b = nl.ndarray((2, 6), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=x[10:, 7:].ap([[40, 2], [2, 6]], offset=1))
        t = nl.ndarray((32, 40), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        c = nl.ndarray((16, 10), dtype=x.dtype, buffer=nl.sbuf)
        # on chip: partitions 3..18 (the row step is the partition), columns 5, 8, ..., 32
        nisa.tensor_copy(dst=c, src=t.ap([[40, 16], [3, 10]], offset=3 * 40 + 5))
        d = nl.ndarray((32, 80), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=d, src=t.ap([[80, 32], [1, 80]], dtype=nl.bfloat16))
        outs = []
        for v in (a, b, c, d):
            o = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=v)
            outs.append(o)
        return tuple(outs)

    a, b, c, d = k(x)
    np.testing.assert_array_equal(a, x.reshape(-1)[3 + 160 * np.arange(8)[:, None]
                                                   + 8 * np.arange(5)[None, :]])
    np.testing.assert_array_equal(b, x[10:12, 8:20:2])
    np.testing.assert_array_equal(c, x[3:19, 5:35:3])
    np.testing.assert_array_equal(d, x.view(ml_dtypes.bfloat16))


def test_scalar_and_vector_offsets_select_rows_at_run_time():
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    rows = np.array([[5], [63], [0], [17]], dtype=np.int32)

    @nki.jit
    def k(x, rows, start):
        idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        g = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=x.ap([[16, 4], [1, 16]], vector_offset=idx, indirect_dim=0))
        # scalar offset from a 1x1 SBUF tensor and from a register
        s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=start)
        h = nl.ndarray((2, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=h, src=x.ap([[16, 2], [1, 16]], scalar_offset=s, indirect_dim=0))
        reg = nisa.register_alloc()
        nisa.register_load(reg, s)
        r = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=r, src=x.ap([[16, 1], [1, 4]], offset=2, scalar_offset=reg,
                                      indirect_dim=0))
        sel = nl.ndarray((1, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sel, src=x.select(0, reg))            # dynamic select
        vs = nl.ndarray((4, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=vs, src=x.vector_select(0, idx))
        outs = []
        for v in (g, h, r, sel, vs):
            o = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=v)
            outs.append(o)
        return tuple(outs)

    g, h, r, sel, vs = k(x, rows, np.array([[9]], np.int32))
    np.testing.assert_array_equal(g, x[rows[:, 0]])
    np.testing.assert_array_equal(h, x[9:11])
    np.testing.assert_array_equal(r, x[9:10, 2:6])
    np.testing.assert_array_equal(sel, x[9:10])
    np.testing.assert_array_equal(vs, x[rows[:, 0]])


def test_vector_offset_scatter_and_oob_skip():
    src = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    rows = np.array([[2], [0], [99], [5]], dtype=np.int32)

    @nki.jit
    def k(src, rows, base):
        idx = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        t = nl.ndarray((4, 8), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src)
        nisa.dma_copy(dst=base.ap([[8, 4], [1, 8]], vector_offset=idx, indirect_dim=0), src=t,
                      oob_mode=nisa.oob_mode.skip)
        return base

    base = np.zeros((6, 8), np.float32)
    got = k(src, rows, base)
    ref = np.zeros((6, 8), np.float32)
    for p, r in enumerate(rows[:, 0]):
        if r < 6:
            ref[r] = src[p]
    np.testing.assert_array_equal(got, ref)


def test_out_of_range_ap_view_errors_only_when_accessed():
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)

    @nki.jit
    def k(x, use):
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        past_end = t.ap([[8, 4], [1, 4]], offset=6)       # columns 6..9 of an 8-column row
        out = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[:, 0:4])
        if use:
            u = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=u, src=past_end)
        return out

    np.testing.assert_array_equal(k(x, False), x[:, :4])
    with pytest.raises(TrnsimError, match="leaves tensor") as ei:
        k(x, True)
    assert ei.value.rule == "err_tensor_access_out_of_bound"


# -- loops on registers --------------------------------------------------------------------------

def test_fori_loop_dynamic_range_and_while_loop_with_registers():
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)

    @nki.jit
    def k(x, n):
        out = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        zero = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=zero, value=0.0)
        nisa.dma_copy(dst=out, src=zero)
        n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n_sb, src=n)
        ub = nisa.register_alloc()
        nisa.register_load(ub, n_sb)
        tmp = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)

        def body(i):                                 # rows 0..n-1 copied through registers
            nisa.dma_copy(dst=tmp, src=x.ap([[4, 1], [1, 4]], scalar_offset=i, indirect_dim=0))
            nisa.dma_copy(dst=out.ap([[4, 1], [1, 4]], scalar_offset=i, indirect_dim=0), src=tmp)

        nl.fori_loop(0, ub, body)
        count = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=count, value=0.0)
        for _ in nl.dynamic_range(1, ub, 2):             # ceil((n-1)/2) iterations
            nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=1.0)
        left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=left, src=n_sb)
        w = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=w, value=0.0)
        cond = nisa.register_alloc()
        nisa.register_load(cond, left)

        def wbody(r):                                    # counts down from n
            nisa.tensor_scalar(dst=w, data=w, op0=nl.add, operand0=10.0)
            nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1)
            nisa.register_load(r, left)
            return r

        nl.while_loop(cond, wbody)
        res = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=res[:, 0:1], src=count)
        nisa.dma_copy(dst=res[:, 1:2], src=w)
        stored = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.register_store(stored, ub)
        return out, res, stored

    out, res, stored = k(x, np.array([[5]], np.int32))
    ref = np.zeros_like(x)
    ref[:5] = x[:5]
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(res, [[2.0, 50.0]])
    assert stored[0, 0] == 5


def test_static_loops_reject_register_bounds():
    def body(x):
        r = nisa.register_alloc(3)
        for _ in nl.affine_range(r):
            pass
        return x

    with pytest.raises(KernelError, match="dynamic_range") as ei:
        _run(body, np.zeros(1, np.float32))
    assert ei.value.rule == "static-loop-register"


# -- new-only instructions ---------------------------------------------------------------------

def _sb(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _out(t):
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def test_select_reduce_and_range_select_with_shared_accumulator():
    rng = _rng(6)
    data = rng.standard_normal((16, 32)).astype(np.float32)
    pred = (rng.random((16, 32)) < 0.5).astype(np.uint8)
    onf = rng.standard_normal((16, 1)).astype(np.float32)
    b0 = rng.integers(0, 20, (16, 1)).astype(np.float32)
    b1 = b0 + rng.integers(1, 30, (16, 1)).astype(np.float32)

    @nki.jit
    def k(data, pred, onf, b0, b1):
        d, p, f, lo, hi = _sb(data), _sb(pred), _sb(onf), _sb(b0), _sb(b1)
        sel = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((16, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=sel, predicate=p, on_true=d, on_false=f, reduce_res=mx,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)
        rev = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=rev, predicate=p, on_true=d, on_false=-1.0, reverse_pred=True)
        rs = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        rmax = nl.ndarray((16, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=rs, on_true_tile=d, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lo, bound1=hi, range_start=4,
                          reduce_cmd=nisa.reduce_cmd.reset_reduce)
        # continue the same accumulator on a second tile (shifted range), then read it out
        rs2 = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=rs2, on_true_tile=d, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lo, bound1=hi, range_start=36, reduce_res=rmax,
                          reduce_cmd=nisa.reduce_cmd.reduce)
        return _out(sel), _out(mx), _out(rev), _out(rs), _out(rs2), _out(rmax)

    sel, mx, rev, rs, rs2, rmax = k(data, pred, onf, b0, b1)
    ref_sel = np.where(pred != 0, data, onf)
    np.testing.assert_array_equal(sel, ref_sel)
    np.testing.assert_array_equal(mx, ref_sel.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(rev, np.where(pred == 0, data, -1.0))
    fmin = np.finfo(np.float32).min
    refs = []
    for start in (4, 36):
        idx = start + np.arange(32, dtype=np.float32)[None, :]
        refs.append(np.where((idx >= b0) & (idx < b1), data, fmin))
    np.testing.assert_array_equal(rs, refs[0])
    np.testing.assert_array_equal(rs2, refs[1])
    np.testing.assert_array_equal(rmax, np.maximum(refs[0].max(1, keepdims=True),
                                                   refs[1].max(1, keepdims=True)))


def test_find_index8_and_match_replace8():
    rng = _rng(7)
    data = rng.permutation(16 * 40).reshape(16, 40).astype(np.float32)
    data[3, 10] = data[3, 2]            # a duplicate value in one row
    vals = -np.sort(-data, axis=1)[:, :8].copy()
    vals[5, 7] = -1.0                   # not present -> sentinel / no replacement
    vals[3, :2] = data[3, 2]            # duplicate vals pick successive occurrences

    @nki.jit
    def k(data, vals):
        d, v = _sb(data), _sb(vals)
        idx = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=d, vals=v)
        rep = nl.ndarray((16, 40), dtype=nl.float32, buffer=nl.sbuf)
        ridx = nl.ndarray((16, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=rep, data=d, vals=v, imm=-5.0, dst_idx=ridx)
        return _out(idx), _out(rep), _out(ridx)

    idx, rep, ridx = k(data, vals)
    ref_idx = np.zeros((16, 8), np.int64)
    ref_rep = data.copy()
    ref_ridx = np.zeros((16, 8), np.int64)
    for p in range(16):
        used = set()
        for j in range(8):
            hits = [i for i in np.flatnonzero(data[p] == vals[p, j]) if i not in used]
            ref_idx[p, j] = hits[0] if hits else 0xFFFFFFFF
            used.update(hits[:1])
        done = set()
        for j in range(7, -1, -1):
            hits = [i for i in np.flatnonzero(data[p] == vals[p, j]) if i not in done]
            ref_ridx[p, j] = hits[0] if hits else 0xFFFFFFFF
            done.update(hits[:1])
        ref_rep[p, sorted(done)] = -5.0
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(rep, ref_rep)
    np.testing.assert_array_equal(ridx, ref_ridx)
    assert tuple(ridx[3, :2]) == (10, 2) and tuple(idx[3, :2]) == (2, 10)


def test_tensor_scalar_cumulative_chains_through_the_accumulator():
    rng = _rng(8)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    imm = rng.standard_normal((8, 1)).astype(np.float32)

    @nki.jit
    def k(x, imm):
        t, i = _sb(x), _sb(imm)
        a = nl.ndarray((8, 12), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=a, src=t, op0=nl.multiply, op1=nl.add, imm0=i)
        b = nl.ndarray((8, 12), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=b, src=t, op0=nl.multiply, op1=nl.add, imm0=i,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
        c = nl.ndarray((8, 12), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=c, src=t, op0=nl.add, op1=nl.maximum, imm0=0.0,
                                      imm1=0.5, reduce_cmd=nisa.reduce_cmd.load_reduce)
        return _out(a), _out(b), _out(c)

    a, b, c = k(x, imm)
    ra = np.cumsum(x * imm, axis=1, dtype=np.float64)
    np.testing.assert_allclose(a, ra, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, ra + ra[:, -1:], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c, np.maximum.accumulate(np.maximum(x, 0.5), axis=1))


def test_local_gather_and_nc_n_gather():
    rng = _rng(9)
    src = rng.standard_normal((32, 64)).astype(np.float32)
    index = rng.integers(0, 15, (32, 3)).astype(np.uint16) * 4   # element offsets, 4 per index
    ind = rng.integers(0, 64, (32, 10)).astype(np.uint32)

    @nki.jit
    def k(src, index, ind):
        s, ix, nx = _sb(src), _sb(index), _sb(ind)
        lg = nl.ndarray((32, 40 * 4 // 4 * 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.local_gather(dst=lg, src_buffer=s, index=ix, num_elem_per_idx=4, num_valid_indices=10)
        ng = nl.ndarray((32, 10), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=ng, data=s, indices=nx)
        return _out(lg), _out(ng)

    lg, ng = k(src, index, ind)
    ref = np.zeros((32, 40), np.float32)
    for c in range(2):
        rows = slice(16 * c, 16 * c + 16)
        offs = index[rows].astype(np.int64).flatten(order="F")[:10]
        cols = (offs[:, None] + np.arange(4)).reshape(-1)
        ref[rows] = src[rows][:, cols]
    np.testing.assert_array_equal(lg, ref)
    np.testing.assert_array_equal(ng, np.take_along_axis(src, ind.astype(np.int64), axis=1))


def test_nonzero_with_count_and_sequence_bounds():
    rng = _rng(10)
    x = (rng.random((32, 12)) < 0.4).astype(np.float32)
    seg = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype=np.int32)

    @nki.jit
    def k(x, seg):
        t = _sb(x)
        nz = nl.ndarray((32, 13), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=nz, value=7)
        nisa.nonzero_with_count(dst=nz, src=t, index_offset=100, padding_val=-1)
        s = _sb(seg)
        sb = nl.ndarray((1, 2, 9), dtype=nl.int32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=sb, segment_ids=s)
        return _out(nz), _out(sb)

    nz, sb = k(x, seg)
    ref = np.full((32, 13), 7, np.int64)
    for p in (0, 16):
        hits = np.flatnonzero(x[p])
        ref[p] = -1
        ref[p, :hits.size] = hits + 100
        ref[p, 12] = hits.size
    np.testing.assert_array_equal(nz, ref)
    np.testing.assert_array_equal(sb, [[[9, 1, 1, 3, 3, 3, 9, 7, 7],
                                        [-1, 3, 3, 6, 6, 6, -1, 9, 9]]])


def test_wrapped_isa_ops_against_numpy():
    rng = _rng(11)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    y = rng.standard_normal((32, 16)).astype(np.float32)
    col = rng.standard_normal((32, 1)).astype(np.float32)

    @nki.jit
    def k(x, y, col):
        a, b, c = _sb(x), _sb(y), _sb(col)
        outs = []

        def new(shape=(32, 16), dtype=nl.float32):
            return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)

        t = new()
        nisa.tensor_tensor(dst=t, data1=a, data2=b, op=nl.maximum)
        outs.append(t)
        t = new()
        nisa.scalar_tensor_tensor(dst=t, data=a, op0=nl.multiply, operand0=c, op1=nl.subtract,
                                  operand1=b)
        outs.append(t)
        t, r = new(), new((32, 1))
        nisa.activation(dst=t, op=nl.exp, data=a, scale=0.5, bias=c, reduce_op=nl.add,
                        reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        outs += [t, r]
        t, r = new(), new((32, 1))
        nisa.tensor_scalar_reduce(dst=t, data=a, op0=nl.add, operand0=1.0, reduce_op=nl.maximum,
                                  reduce_res=r, reduce_res_negate=True)
        outs += [t, r]
        t = new((32, 1))
        nisa.tensor_reduce(dst=t, op=nl.add, data=a, axis=1, negate=True)
        outs.append(t)
        ps = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=ps, data=a)
        t = new((16, 32))
        nisa.tensor_copy(dst=t, src=ps)
        outs.append(t)
        t = new((32, 8))
        nisa.max8(dst=t, src=a)
        outs.append(t)
        t = new()
        nisa.reciprocal(dst=t, data=b)
        outs.append(t)
        t = new((32, 16), nl.int32)
        nisa.iota(dst=t, pattern=[[2, 16]], offset=3, channel_multiplier=100)
        outs.append(t)
        t = new()
        nisa.affine_select(dst=t, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=a,
                           on_false_value=-9.0, cmp_op=nl.greater_equal)
        outs.append(t)
        t = new((1, 16))
        nisa.tensor_partition_reduce(dst=t, op=nl.add, data=a)
        outs.append(t)
        return tuple(_out(o) for o in outs)

    got = list(k(x, y, col))
    e = np.exp(x * 0.5 + col)
    p = np.arange(32)[:, None]
    f = np.arange(16)[None, :]
    refs = [np.maximum(x, y), x * col - y, e, e.sum(1, keepdims=True), x + 1,
            -(x + 1).max(1, keepdims=True), -x.sum(1, keepdims=True), x.T,
            -np.sort(-x, axis=1)[:, :8], 1 / y, 3 + 100 * p + 2 * f,
            np.where(p - f >= 0, x, -9.0), x.sum(0, keepdims=True)]
    assert len(got) == len(refs)
    for i, (g, r) in enumerate(zip(got, refs)):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=1e-5, err_msg=f"output {i}")


def test_language_wrappers_return_new_tiles():
    rng = _rng(12)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((64, 48)).astype(np.float32)

    @nki.jit
    def k(x, w):
        a = nl.load(x)
        b = nl.load(w)
        s = nl.sum(nl.exp(a), axis=1)
        m = nl.matmul(a, b, transpose_x=True)           # (32, 48) = x.T @ w
        sm = nl.softmax(a, axis=1)
        wh = nl.where(nl.greater(a, 0.0), a, nl.zeros((64, 32), nl.float32))
        tr = nl.transpose(a)
        o = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o, s)
        outs = [o]
        for t in (m, sm, wh, tr):
            u = nl.copy(t) if nl.is_psum(t) else t
            r = nl.ndarray(u.shape, dtype=u.dtype, buffer=nl.shared_hbm)
            nl.store(r, u)
            outs.append(r)
        return tuple(outs)

    s, m, sm, wh, tr = k(x, w)
    np.testing.assert_allclose(s, np.exp(x).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(m, x.T @ w, rtol=1e-4, atol=1e-4)
    ex = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(sm, ex / ex.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(wh, np.maximum(x, 0))
    np.testing.assert_array_equal(tr, x.T)


def test_shared_identity_matrix_buffers_and_nkiobject():
    class Cfg(nl.NKIObject):
        pass

    c = Cfg(tile=64)
    assert c.tile == 64
    assert nl.is_hbm(nl.shared_hbm) and nl.is_on_chip(nl.psum) and nl.is_sbuf(nl.sbuf)
    assert not nl.is_psum(nl.sbuf)

    @nki.jit
    def k(x):
        i = nl.shared_identity_matrix(8, dtype=nl.float32)
        assert nl.is_sbuf(i)
        return _out(i)

    np.testing.assert_array_equal(k(np.zeros(1, np.float32)), np.identity(8))


def test_collectives_outside_a_kernel():
    # collectives run in kernels now (tests/nki/test_collectives.py); all_to_all_v stays unsupported
    assert nki.collectives.rank_id() == 0
    g = nki.collectives.ReplicaGroup([[0, 1]])
    assert g.groups == [[0, 1]]
    with pytest.raises(KernelError, match="inside a running kernel"):
        nki.collectives.all_reduce([], [], g, nl.add)
    with pytest.raises(UnsupportedError, match="all_to_all_v") as ei:
        nki.collectives.all_to_all_v([], [], g, None)
    assert ei.value.rule == "unsupported-api"


def test_fmod_keeps_the_sign_of_the_dividend_and_mod_of_the_divisor():
    nl, nisa = nki.language, nki.isa

    @nki.jit
    def k(x, y):
        out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=b, src=y)
        for i, op in enumerate((nl.fmod, nl.mod)):
            c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=c, data1=a, data2=b, op=op)
            nisa.dma_copy(dst=out[i], src=c)
        return out

    x = np.tile(np.array([-7.5, 7.5, -3.0, 5.0], np.float32), (4, 1))
    y = np.tile(np.array([2.0, -2.0, 2.5, -3.0], np.float32), (4, 1))
    got = k(x, y)
    np.testing.assert_array_equal(got[0], np.fmod(x, y))
    np.testing.assert_array_equal(got[1], np.mod(x, y))


def test_nkiobject_dataclass_plain_attributes_are_fields():
    # the public library writes its kernel-side records as @dataclass subclasses of NKIObject
    # whose fields are plain class attributes; NKI builds them by keyword
    import dataclasses

    @dataclasses.dataclass
    class Params(nl.NKIObject):
        idx = None
        size: int = 4
        name = "x"

    p = Params(idx=3, name="y")
    assert (p.idx, p.size, p.name) == (3, 4, "y")
    assert Params().idx is None and Params().name == "x"
