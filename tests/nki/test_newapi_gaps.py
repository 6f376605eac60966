"""New ``nki`` API gaps found running nki-library kernels: ``nl.tile_size`` fields per API and
target generation, unary ALU ops in ``nisa.tensor_scalar``, ``nl.gather_flattened(axis=)`` and
register-bounded device loops.  References are numpy or hand calculations written in the test."""
import textwrap

import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import GenerationError, KernelError, ShapeError, TileSizeFieldError, TrnsimError
import trnsim.frontends.nki as nki

nl = nki.language
nisa = nki.isa

_TARGET_VARS = ("TRNSIM_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION",
                "TRNSIM_HARDWARE")


@pytest.fixture
def target(monkeypatch):
    """Select the target generation through the environment, as a user would."""
    for var in _TARGET_VARS:
        monkeypatch.delenv(var, raising=False)

    def set_target(name):
        monkeypatch.setenv("TRNSIM_TARGET", name)
    return set_target


# -- 1. nl.tile_size ---------------------------------------------------------------------------

KIB = 1024
# hand-computed: SBUF 192/224/256 KiB per partition x 128 partitions (trn1/trn2/trn3); usable per
# partition = physical - 16 KiB (gen2) or - (16 KiB + 8 B) (gen3/gen4; nki-library spells the gen3
# figure 224*1024 - 16384 - 8); sbuf_fmax counts fp32 elements (4 bytes)
_EXPECTED = {
    "trn1": dict(sbuf_size_bytes=128 * 192 * KIB, sbuf_fmax_bytes=192 * KIB - 16384),
    "trn2": dict(sbuf_size_bytes=128 * 224 * KIB, sbuf_fmax_bytes=224 * KIB - 16384 - 8),
    "trn3": dict(sbuf_size_bytes=128 * 256 * KIB, sbuf_fmax_bytes=256 * KIB - 16384 - 8),
}
_COMMON = dict(pmax=128, psum_fmax=512, psum_bank_fmax=512, psum_bank_fmax_bytes=2 * KIB,
               psum_num_banks=8, gemm_stationary_fmax=128, gemm_moving_fmax=512, bn_stats_fmax=512,
               psum_min_align=4, sbuf_min_align=1)
_NEW_FIELDS = {"pmax", "psum_fmax", "psum_bank_fmax", "psum_bank_fmax_bytes", "psum_num_banks",
               "sbuf_size_bytes", "sbuf_fmax", "sbuf_fmax_bytes", "gemm_stationary_fmax",
               "gemm_moving_fmax", "bn_stats_fmax", "psum_min_align", "sbuf_min_align",
               "total_available_sbuf_size"}
_LEGACY_FIELDS = {"bn_stats_fmax", "gemm_moving_fmax", "gemm_stationary_fmax", "pmax", "psum_fmax",
                  "psum_min_align", "sbuf_min_align", "total_available_sbuf_size"}


def _expected(tgt):
    e = dict(_COMMON, **_EXPECTED[tgt])
    e["sbuf_fmax"] = e["sbuf_fmax_bytes"] // 4
    e["total_available_sbuf_size"] = e["sbuf_fmax_bytes"]  # deprecated alias: per partition
    return e


@pytest.mark.parametrize("tgt", ["trn1", "trn2", "trn3"])
def test_tile_size_has_every_new_api_field_per_generation(target, tgt):
    target(tgt)
    exp = _expected(tgt)
    assert set(exp) == _NEW_FIELDS
    got = {f: getattr(nl.tile_size, f) for f in _NEW_FIELDS}
    assert got == exp
    assert all(type(v) is int for v in got.values())  # plain ints, usable in shapes and range()

    seen = {}

    @nki.jit
    def k(x):  # inside a kernel the launch's target decides
        seen.update({f: getattr(nl.tile_size, f) for f in _NEW_FIELDS})
        return x

    k(np.zeros((1, 1), np.float32))
    assert seen == exp


def test_legacy_tile_size_has_only_the_nki_0_1_fields(target):
    target("trn2")
    import neuronxcc.nki.language as legacy_nl
    ts = legacy_nl.tile_size
    assert {f for f in _LEGACY_FIELDS if hasattr(ts, f)} == _LEGACY_FIELDS
    exp = _expected("trn2")
    assert {f: getattr(ts, f) for f in _LEGACY_FIELDS} == {f: exp[f] for f in _LEGACY_FIELDS}
    for f in sorted(_NEW_FIELDS - _LEGACY_FIELDS):
        assert not hasattr(ts, f), f
    with pytest.raises(TileSizeFieldError) as ei:
        ts.sbuf_fmax  # noqa: B018  (line blamed below)
    err = ei.value
    assert isinstance(err, TrnsimError) and isinstance(err, AttributeError)
    assert err.rule == "tile-size-field" and err.value == "sbuf_fmax"
    assert "total_available_sbuf_size" in str(err.limit)
    assert "test_newapi_gaps.py" in err.where and "ts.sbuf_fmax" in err.where


def test_new_tile_size_unknown_field_is_a_trnsim_error(target):
    target("trn2")
    with pytest.raises(TileSizeFieldError) as ei:
        nl.tile_size.sbuf_fmaxx  # noqa: B018
    assert ei.value.rule == "tile-size-field" and ei.value.value == "sbuf_fmaxx"
    assert "nl.tile_size.sbuf_fmaxx" in ei.value.where


def test_tile_size_figures_come_from_the_hardware_file(target, tmp_path, monkeypatch):
    target("trn2")
    hw = tmp_path / "what_if.toml"
    hw.write_text(textwrap.dedent("""
        [cores.v3.tile_size]
        sbuf_min_align = { value = 32, source = "choice: what-if 32 B SBUF alignment" }
        psum_min_align = { value = 8, source = "choice: what-if" }
        [cores.v3.sbuf]
        reserved_bytes_per_partition = { value = 32768, source = "choice: what-if 32 KiB reserved" }
        """))
    monkeypatch.setenv("TRNSIM_HARDWARE", str(hw))
    ts = nl.tile_size
    assert (ts.sbuf_min_align, ts.psum_min_align) == (32, 8)
    assert ts.sbuf_fmax_bytes == ts.total_available_sbuf_size == 224 * KIB - 32 * KIB
    assert ts.sbuf_fmax == (224 * KIB - 32 * KIB) // 4
    assert ts.sbuf_size_bytes == 128 * 224 * KIB  # physical total is unchanged
    from trnsim.hardware import get_core
    src = get_core("trn2", str(hw)).source("tile_size.sbuf_min_align")
    assert src.startswith("choice: what-if")
    assert get_core("trn2").source("tile_size.sbuf_min_align").startswith("choice:")


# -- 2. nisa.tensor_scalar with unary ALU ops --------------------------------------------------

def _ts_kernel(data_dtype, op0, operand0=None, op1=None, operand1=None, engine=None,
               reverse0=False):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        kw = {} if engine is None else {"engine": engine}
        nisa.tensor_scalar(dst=r, data=t, op0=op0, operand0=operand0, reverse0=reverse0, op1=op1,
                           operand1=operand1, **kw)
        nisa.dma_copy(dst=out, src=r)
        return out
    return k


def _signed(seed=0, shape=(128, 16)):
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(np.float32)


def _positive(seed=1, shape=(128, 16)):
    return np.random.default_rng(seed).uniform(0.25, 9, shape).astype(np.float32)


@pytest.mark.parametrize("op, operand, x, ref", [
    ("abs", None, _signed(), lambda x: np.abs(x)),
    ("abs", 0, _signed(), lambda x: np.abs(x)),          # operand0 may be 0 for unary ops
    ("abs", 0.0, _signed(), lambda x: np.abs(x)),
    ("reciprocal", None, _positive(), lambda x: np.float32(1) / x),
    ("rsqrt", None, _positive(), lambda x: np.float32(1) / np.sqrt(x)),
])


def test_tensor_scalar_unary_op0_matches_numpy(target, op, operand, x, ref):
    target("trn2")
    got = _ts_kernel(np.float32, getattr(nl, op), operand)(x)
    np.testing.assert_allclose(got, ref(x), rtol=1e-6, atol=0)


def test_tensor_scalar_unary_in_either_stage_chains_with_a_binary_op(target):
    target("trn2")
    x = _signed(2)
    got = _ts_kernel(np.float32, nl.abs, None, nl.add, 1.5)(x)              # |x| + 1.5
    np.testing.assert_allclose(got, np.abs(x) + np.float32(1.5), rtol=1e-6)
    got = _ts_kernel(np.float32, nl.subtract, 3.0, nl.abs, None)(x)          # |x - 3|
    np.testing.assert_allclose(got, np.abs(x - np.float32(3)), rtol=1e-6)
    got = _ts_kernel(np.float32, nl.subtract, 3.0, nl.reciprocal, 0, reverse0=True)(x)
    np.testing.assert_allclose(got, np.float32(1) / (np.float32(3) - x), rtol=1e-6)


def test_tensor_scalar_invert_is_a_bitvec_unary_op(target):
    target("trn2")
    x = np.random.default_rng(3).integers(-2**31, 2**31 - 1, (128, 8), dtype=np.int64) \
        .astype(np.int32)
    got = _ts_kernel(np.int32, nl.invert, None)(x)
    np.testing.assert_array_equal(got, np.invert(x))
    got = _ts_kernel(np.int32, nl.invert, None, nl.bitwise_and, 0xFF)(x)
    np.testing.assert_array_equal(got, np.invert(x) & 0xFF)
    with pytest.raises(KernelError) as ei:  # bitvec and arithmetic ops cannot mix
        _ts_kernel(np.int32, nl.invert, None, nl.add, 1)(x)
    assert ei.value.rule == "tensor_scalar-ops"


def test_tensor_scalar_square_and_relu_are_gen4_opcodes(target):
    x = _signed(4)
    target("trn3")
    np.testing.assert_allclose(_ts_kernel(np.float32, nl.square, None)(x), x * x, rtol=1e-6)
    np.testing.assert_array_equal(_ts_kernel(np.float32, nl.relu, None)(x), np.maximum(x, 0))
    target("trn2")
    with pytest.raises(GenerationError) as ei:
        _ts_kernel(np.float32, nl.square, None)(x)
    err = ei.value
    assert err.rule == "generation" and err.limit == "gen4+"
    assert err.value == "gen3" and "nisa.tensor_scalar" in err.where
    with pytest.raises(GenerationError):
        _ts_kernel(np.float32, nl.multiply, 2.0, nl.relu, None)(x)


def test_tensor_scalar_broken_unary_uses_are_named(target):
    target("trn2")
    x = _signed(5)
    with pytest.raises(KernelError) as ei:           # a unary op takes no operand
        _ts_kernel(np.float32, nl.abs, 2.0)(x)
    assert ei.value.rule == "tensor_scalar-unary-operand" and ei.value.limit == "None or 0"
    assert ei.value.value == "2.0" and "nisa.tensor_scalar" in ei.value.where
    with pytest.raises(KernelError) as ei:           # an activation function is not an ALU op
        _ts_kernel(np.float32, nl.exp, None)(x)
    assert ei.value.rule == "tensor_scalar-op" and ei.value.value == "exp"
    with pytest.raises(KernelError) as ei:           # trn2 Scalar engine: multiply[, add] or add
        _ts_kernel(np.float32, nl.abs, None, engine=nisa.engine.scalar)(x)
    assert (ei.value.rule, ei.value.limit, ei.value.value) == ("generation", "gen4+", "gen3")


def test_tensor_scalar_reduce_takes_a_unary_op0(target):
    target("trn2")
    x = _signed(6, (64, 32))

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        rr = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar_reduce(dst=r, data=t, op0=nl.abs, operand0=None, reduce_op=nl.maximum,
                                  reduce_res=rr)
        nisa.dma_copy(dst=out, src=r)
        nisa.dma_copy(dst=red, src=rr)
        return out, red

    out, red = k(x)
    np.testing.assert_array_equal(out, np.abs(x))
    np.testing.assert_array_equal(red[:, 0], np.abs(x).max(axis=1))


# -- 3. nl.gather_flattened(axis=) -------------------------------------------------------------

def _gather_kernel(axis=None, dtype=None):
    @nki.jit
    def k(d, i):
        out_dtype = d.dtype if dtype is None else dtype
        out = nl.ndarray(i.shape, dtype=out_dtype, buffer=nl.shared_hbm)
        ds_ = nl.ndarray(d.shape, dtype=d.dtype, buffer=nl.sbuf)
        is_ = nl.ndarray(i.shape, dtype=i.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ds_, src=d)
        nisa.dma_copy(dst=is_, src=i)
        kw = {} if axis is None else {"axis": axis}
        if dtype is not None:
            kw["dtype"] = dtype
        nisa.dma_copy(dst=out, src=nl.gather_flattened(ds_, is_, **kw))
        return out
    return k


def test_gather_flattened_default_is_the_documented_example():
    # the example printed in the nki.language.gather_flattened docs
    data = np.array([[[1., 2.], [3., 4.]], [[5., 6.], [7., 8.]]], np.float32)
    idx = np.array([[[0, 1], [1, 3]], [[3, 3], [1, 0]]], np.uint32)
    want = np.array([[[1., 2.], [2., 4.]], [[8., 8.], [6., 5.]]], np.float32)
    np.testing.assert_array_equal(_gather_kernel()(data, idx), want)
    np.testing.assert_array_equal(_gather_kernel(axis=0)(data, idx), want)


def test_gather_flattened_axis_counts_free_dims():
    rng = np.random.default_rng(7)
    data = rng.standard_normal((16, 3, 4, 5)).astype(np.float32)
    # axis=0: all free dims flattened (60 per partition); indices of any free shape
    i0 = rng.integers(0, 60, (16, 2, 9)).astype(np.uint32)
    ref0 = np.take_along_axis(data.reshape(16, 60), i0.reshape(16, 18).astype(np.int64), axis=1)
    np.testing.assert_array_equal(_gather_kernel(axis=0)(data, i0), ref0.reshape(16, 2, 9))
    # axis=1: dim 1 (size 3) is a batch dim, dims 2-3 (20 elements) are flattened
    i1 = rng.integers(0, 20, (16, 3, 7)).astype(np.uint32)
    ref1 = np.take_along_axis(data.reshape(16, 3, 20), i1.astype(np.int64), axis=2)
    np.testing.assert_array_equal(_gather_kernel(axis=1)(data, i1), ref1)
    # axis=-1 (== 2 here): gather along the last dim, numpy's take_along_axis
    i2 = rng.integers(0, 5, (16, 3, 4, 6)).astype(np.uint32)
    ref2 = np.take_along_axis(data, i2.astype(np.int64), axis=-1)
    np.testing.assert_array_equal(_gather_kernel(axis=-1)(data, i2), ref2)
    np.testing.assert_array_equal(_gather_kernel(axis=2)(data, i2), ref2)
    # dtype= casts the result
    got = _gather_kernel(axis=-1, dtype=nl.bfloat16)(data, i2)
    np.testing.assert_array_equal(got.astype(np.float32),
                                  ref2.astype(nl.bfloat16).astype(np.float32))


def test_gather_flattened_bad_axis_and_shapes_are_named():
    rng = np.random.default_rng(8)
    data = rng.standard_normal((8, 3, 5)).astype(np.float32)
    idx = rng.integers(0, 5, (8, 3, 5)).astype(np.uint32)
    for ax in (2, -3):  # data has free axes 0, 1 (== -2, -1); -3 would be the partition dim
        with pytest.raises(ShapeError) as ei:
            _gather_kernel(axis=ax)(data, idx)
        assert ei.value.rule == "gather-axis" and ei.value.value == ax
        assert ei.value.limit == "-2..1" and "gather_flattened" in ei.value.where
    with pytest.raises(ShapeError) as ei:  # batch dim 3 vs 2
        _gather_kernel(axis=1)(data, idx[:, :2])
    assert ei.value.rule == "gather-batch-shape"
    with pytest.raises(KernelError) as ei:  # index 5 is past a 5-element row
        _gather_kernel(axis=1)(data, np.full((8, 3, 2), 5, np.uint32))
    assert ei.value.rule == "err_tensor_access_out_of_bound" and ei.value.value == 5


# -- 4. device loops with register bounds ------------------------------------------------------

def _counts_kernel(make_loops):
    @nki.jit
    def k(x):
        res = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        cnt = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=cnt, value=0.0)

        def tick(j):
            nisa.tensor_scalar(dst=cnt[:, j:j + 1], data=cnt[:, j:j + 1], op0=nl.add,
                               operand0=1.0)

        make_loops(tick)
        nisa.dma_copy(dst=res, src=cnt)
        return res
    return k


def test_register_stop_bound_is_rechecked_every_iteration():
    """Dynamic loops are hardware loops (branches on the engine sequencers): the counter is
    compared with the bound register before each iteration, so a body that reloads the bound
    changes the trip count; the start value is read once at loop entry."""
    def loops(tick):
        three = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=three, value=3)
        ub = nisa.register_alloc(6)
        for _ in nl.dynamic_range(0, ub):          # i=0: ub<-3; i=1,2 run; i=3 stops: 3 trips
            tick(0)
            nisa.register_load(ub, three)

        ub2 = nisa.register_alloc(2)

        def grow(i):                               # i=0: ub2<-4; i=1,2,3 run: 4 trips
            tick(1)
            nisa.register_move(ub2, 4)
        nl.fori_loop(0, ub2, grow)

        lo = nisa.register_alloc(0)

        def fixed(i):                              # start re-set and i overwritten: no effect
            tick(2)
            nisa.register_move(lo, 4)
            nisa.register_move(i, 100)
        nl.fori_loop(lo, 5, fixed)                 # 5 trips

        lo2, hi2 = nisa.register_alloc(1), nisa.register_alloc(8)
        for _ in nl.dynamic_range(lo2, hi2, 3):    # 1, 4, 7: 3 trips
            tick(3)

    got = _counts_kernel(loops)(np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(got, [[3.0, 4.0, 5.0, 3.0]])


def test_dynamic_range_loop_variable_is_a_register_with_the_counter_value():
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)

    @nki.jit
    def k(x):
        out = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        zero = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=zero, value=0.0)
        nisa.dma_copy(dst=out, src=zero)
        row = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        hi = nisa.register_alloc(7)
        for i in nl.dynamic_range(1, hi, 2):       # rows 1, 3, 5
            assert isinstance(i, nisa.VirtualRegister)
            nisa.dma_copy(dst=row, src=x.ap([[4, 1], [1, 4]], scalar_offset=i, indirect_dim=0))
            nisa.dma_copy(dst=out.ap([[4, 1], [1, 4]], scalar_offset=i, indirect_dim=0), src=row)
        return out

    ref = np.zeros_like(x)
    ref[[1, 3, 5]] = x[[1, 3, 5]]
    np.testing.assert_array_equal(k(x), ref)


def test_host_arithmetic_on_a_loop_register_is_named():
    def loops(tick):
        for i in nl.dynamic_range(2):
            nl.ds(i * 128, 128)

    with pytest.raises(KernelError) as ei:
        _counts_kernel(loops)(np.zeros((1, 1), np.float32))
    assert ei.value.rule == "register-host-arithmetic"
    assert "i * 128" in ei.value.where


# -- nl.abs_max / nl.abs_min (trn3 language functions) ------------------------------------------

def _by_magnitude_kernel(fn):
    @nki.jit
    def k(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=b, src=y)
        nisa.dma_copy(dst=out, src=fn(a, b))
        return out
    return k


def test_abs_max_and_abs_min_return_the_signed_input_and_y_on_ties(target):
    target("trn3")
    x, y = _signed(7), _signed(8)
    x[:, 0], y[:, 0] = 1.0, -1.0       # ties (|x| == |y|) give y
    x[:, 1], y[:, 1] = -5.0, 3.0       # the docs' example: abs_max(-5, 3) = -5, abs_min = 3
    want_max = np.where(np.abs(x) > np.abs(y), x, y)
    want_min = np.where(np.abs(x) < np.abs(y), x, y)
    got_max = _by_magnitude_kernel(nl.abs_max)(x, y)
    got_min = _by_magnitude_kernel(nl.abs_min)(x, y)
    np.testing.assert_array_equal(got_max, want_max)
    np.testing.assert_array_equal(got_min, want_min)
    assert (got_max[:, 0] == -1.0).all() and (got_min[:, 0] == -1.0).all()
    assert (got_max[:, 1] == -5.0).all() and (got_min[:, 1] == 3.0).all()


def test_abs_max_function_needs_trn3_but_the_alu_token_keeps_the_magnitude(target):
    target("trn2")
    x = _signed(9)
    with pytest.raises(GenerationError) as ei:
        _by_magnitude_kernel(nl.abs_max)(x, x)
    assert ei.value.rule == "generation" and ei.value.limit == "gen4+"
    # as an ALU op of an ISA instruction it is the amax idiom: abs_max(x, 0) = |x|
    np.testing.assert_array_equal(_ts_kernel(np.float32, nl.abs_max, 0.0)(x), np.abs(x))


# -- PSUM free size: the elements an access addresses ---------------------------------------------

def test_a_broadcast_psum_operand_counts_its_distinct_elements(target):
    """nki-library's layernorm_tkg subtracts a (128, 320) PSUM mean broadcast to (128, 320, 24):
    7680 iterations per partition but 320 PSUM elements addressed, under the 4096 limit."""
    target("trn2")

    @nki.jit
    def k(x, m):
        out = nl.ndarray((128, 320, 24), dtype=nl.float32, buffer=nl.shared_hbm)
        xs = nl.ndarray((128, 320, 24), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((128, 320), dtype=nl.float32, buffer=nl.sbuf)
        p = nl.ndarray((128, 320), dtype=nl.float32, buffer=nl.psum)
        r = nl.ndarray((128, 320, 24), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        nisa.dma_copy(dst=ms, src=m)
        nisa.tensor_copy(dst=p, src=ms)
        nisa.tensor_tensor(r, xs, p.ap([[320, 128], [1, 320], [0, 24]]), nl.subtract)
        nisa.dma_copy(dst=out, src=r)
        return out

    rng = np.random.default_rng(11)
    x = rng.standard_normal((128, 320, 24)).astype(np.float32)
    m = rng.standard_normal((128, 320)).astype(np.float32)
    np.testing.assert_array_equal(k(x, m), x - m[:, :, None])


def test_a_psum_read_addressing_more_than_4096_elements_is_an_error(target):
    target("trn2")

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 5000), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 5000), dtype=nl.bfloat16, buffer=nl.sbuf)
        p = nl.ndarray((128, 5000), dtype=nl.bfloat16, buffer=nl.psum)
        r = nl.ndarray((128, 5000), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        nisa.tensor_copy(dst=p, src=s)
        nisa.tensor_tensor(r, p, s, nl.add)
        nisa.dma_copy(dst=out, src=r)
        return out

    with pytest.raises(ShapeError) as ei:
        k(np.zeros((128, 5000), dtype=ml_dtypes.bfloat16))
    assert ei.value.rule == "psum-free-size"
    assert ei.value.limit == 4096 and ei.value.value == 5000


# -- empty views ----------------------------------------------------------------------------------

def test_an_empty_shard_view_is_legal_until_an_instruction_touches_it(target):
    """nki-library's cross_entropy gives each LNC core positions ``nl.ds(offset, n)``; with one
    position, core 0's shard is empty and its loop runs zero times."""
    target("trn2")

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        empty = x[nl.ds(128, 0), :]            # 0 rows, never read
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        for _ in range(empty.shape[0]):          # zero iterations
            nisa.dma_copy(dst=t[0:1, :], src=empty)
        nisa.dma_copy(dst=t, src=x[0:128, :])
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    np.testing.assert_array_equal(k(x), x[:128])


def test_an_instruction_on_an_empty_view_names_the_rule(target):
    target("trn2")

    @nki.jit
    def k(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r[0:0, :], data=t[0:0, :], op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out, src=r)
        return out

    with pytest.raises(ShapeError) as ei:
        k(np.zeros((128, 8), np.float32))
    assert ei.value.rule == "empty-access" and ei.value.value == (0, 8)
    assert "test_newapi_gaps.py" in ei.value.where
