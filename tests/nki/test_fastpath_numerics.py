"""The C fast path's numeric kernels (nki/core/_fastpath.c) against numpy + ml_dtypes, bit for bit:
fp32/bf16 add, subtract and multiply rounded to bf16, and the fp32 -> bf16 cast, on random bit
patterns (NaN of both signs, infinities, subnormals, ties), strided views and odd shapes."""
import zlib

import ml_dtypes
import numpy as np
import pytest

from trnsim.nki.core import fastpath

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
pytestmark = pytest.mark.skipif(fastpath._mod is None, reason="C fast path not built")

_SPECIALS32 = np.array([0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                        0x7f800001, 0xff812345, 0x00000001, 0x807fffff, 0x00008000, 0x00018000,
                        0x3f808000, 0x3f818000, 0x7f7fffff, 0xff7f8000, 0x7f7f7fff, 0x3f800000],
                       np.uint32)


def _random(rng, n, d):
    """n values of dtype d from uniformly random bit patterns, with the special values first."""
    if d == F32:
        bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        bits[:_SPECIALS32.size] = _SPECIALS32
        return bits.view(np.float32)
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    bits[:_SPECIALS32.size] = (_SPECIALS32 >> 16).astype(np.uint16)
    return bits.view(BF16)


def _reference(name, a, b):
    with np.errstate(all="ignore"):
        return getattr(np, name)(a.astype(np.float32), b.astype(np.float32)).astype(BF16)


def _same_bits(got, want):
    assert got.dtype == BF16 and got.shape == want.shape
    g, w = got.view(np.uint16), want.view(np.uint16)
    bad = np.argwhere(g != w)
    assert bad.size == 0, f"{bad.shape[0]} differ, first at {tuple(bad[0])}: " \
                          f"{hex(int(g[tuple(bad[0])]))} vs {hex(int(w[tuple(bad[0])]))}"


@pytest.mark.parametrize("name", ["add", "subtract", "multiply"])
@pytest.mark.parametrize("da,db", [(BF16, F32), (F32, BF16), (BF16, BF16), (F32, F32)])
def test_binary_to_bf16_matches_numpy_on_random_bits(name, da, db):
    # crc32, not hash(): str hashes change per process, so a failure could not be replayed
    rng = np.random.default_rng(zlib.crc32(f"{name}|{da}|{db}".encode()))
    n = 1 << 16
    a, b = _random(rng, n, da), _random(rng, n, db)
    ns = _SPECIALS32.size
    b[ns:2 * ns] = _random(rng, 2 * ns, db)[:ns]  # specials against random values too
    # every special against every special, both orders (NaN sign picks, inf - inf, 0 * inf)
    sa = _random(rng, _SPECIALS32.size, da)[:_SPECIALS32.size]
    sb = _random(rng, _SPECIALS32.size, db)[:_SPECIALS32.size]
    ga, gb = np.meshgrid(sa, sb, indexing="ij")
    for x, y in ((a, b), (ga.reshape(-1), gb.reshape(-1))):
        _same_bits(fastpath.binary_to_bf16(name, x, y), _reference(name, x, y))


@pytest.mark.parametrize("case", ["psum_block", "reversed", "column", "3d", "one"])
def test_binary_to_bf16_on_strided_views(case):
    rng = np.random.default_rng(7)
    big = rng.standard_normal((4, 128, 1024), dtype=np.float32).astype(BF16)
    acc = rng.standard_normal((128, 2048), dtype=np.float32)
    a, b = {
        "psum_block": (big[2, :, 512:1024], acc[:, :512]),      # a block of a partition-major tile
        "reversed": (big[1, ::-1, ::3][:64, :100], acc[::2, ::-5][:, :100]),
        "column": (big[0, :, 7:8], acc[:, 100:101]),
        "3d": (big[:, ::4, 10:30], np.broadcast_to(acc[:128:4, 5:25], (4, 32, 20))),
        "one": (big[3, 5:6, 9:10], acc[0:1, 0:1]),
    }[case]
    assert a.shape == b.shape
    for name in ("add", "subtract", "multiply"):
        _same_bits(fastpath.binary_to_bf16(name, a, b), _reference(name, a, b))


def test_f32_to_bf16_matches_ml_dtypes():
    rng = np.random.default_rng(11)
    x = _random(rng, 1 << 18, F32)
    with np.errstate(invalid="ignore", over="ignore"):
        _same_bits(fastpath.f32_to_bf16(x), x.astype(BF16))
        v = x.reshape(512, 512)[::3, 1::2]
        _same_bits(fastpath.f32_to_bf16(v), v.astype(BF16))


def test_the_fast_path_declines_what_it_does_not_cover():
    a = np.ones((4, 4), np.float32)
    assert fastpath.binary_to_bf16("divide", a, a) is None
    assert fastpath.binary_to_bf16("add", a, np.ones((4, 1), np.float32)) is None  # broadcast
    assert fastpath.binary_to_bf16("add", a, a.astype(np.float16)) is None
    assert fastpath.f32_to_bf16(a.astype(np.float64)) is None
    was = fastpath.set_enabled(False)
    try:
        assert fastpath.binary_to_bf16("add", a, a) is None
        assert fastpath.f32_to_bf16(a) is None
        assert not fastpath.product_buffers.give(np.empty((128, 512), np.float32))
    finally:
        fastpath.set_enabled(was)


def test_product_buffers_keep_only_whole_fp32_arrays_and_a_bounded_number():
    pool = fastpath.ProductBuffers()
    assert not pool.give(np.empty((8, 8), np.float64))
    assert not pool.give(np.empty((8, 16), np.float32)[:, :8])  # a view
    a, b, c = (np.empty((8, 8), np.float32) for _ in range(3))
    assert pool.give(a) and pool.give(b) and not pool.give(c)  # two spares per shape
    assert pool.take((8, 8)) is b and pool.take((8, 8)) is a and pool.take((8, 8)) is None
    for i in range(3 * fastpath.ProductBuffers._SHAPES):       # many shapes: bounded
        pool.give(np.empty((i + 1, 3), np.float32))
        assert len(pool._free) <= fastpath.ProductBuffers._SHAPES


def test_view_key_in_c_equals_the_python_key():
    """The reused-view cache key: ints and int/None slices only, exact types (True is not 1)."""
    from trnsim.nki.core.subscript import _view_key
    keys = [0, 5, -1, True, np.int64(3), slice(None), slice(1, 2), slice(1, None, 2),
            slice(True, 2), slice(np.int64(1), 2), (0, slice(None), slice(8, 16)), (1, 2, 3),
            (0, Ellipsis), Ellipsis, None, (None,), (), ((1, 2),), [1, 2],
            (slice(None),) * 12, (slice(0, 4), 2.0), "a", (0, True), slice(None, 5, -1)]
    for k in keys:
        want = _view_key(k)
        got = fastpath._mod.view_key(k)
        assert got == want and type(got) is type(want), k
    assert fastpath._mod.view_key((0, slice(None), slice(8, 16))) == (0, (None, None, None),
                                                                       (8, 16, None))
