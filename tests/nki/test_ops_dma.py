"""Per-instruction checks of data movement (legacy API): nisa.dma_copy (all directions, dtype casts
through fp32, dst_rmw_op=np.add), nisa.dma_transpose (2-D, 3-D, 4-D permutations, HBM and SBUF
sources), nl.load_transpose2d, nl.load / nl.store with masks, dtype= on load, and index-tile
gather (load) / scatter (store).

Copies and transposes move bits and are checked bit-exactly (NaN payloads included); casts go
through fp32 [DMAOV] and are checked against "round to fp32, then RNE / saturating write".
"""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from test_ops_common import (BF16, F16, F32, FLOATS, SETTINGS, assert_exact, f64, legacy, rand,
                             rand_float, rand_int, run, seeds, tile_shapes, write)

I32, U8, I16 = np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.int16)
ALL = FLOATS + (I32, U8, I16)


def _nan_payloads(rng, x):
    """Sprinkle NaNs with random payloads and signs (distinct bit patterns) into a float array."""
    layout = {F32: (np.uint32, 0x7F800000, 0x007FFFFF, 0x80000000),
              BF16: (np.uint16, 0x7F80, 0x007F, 0x8000), F16: (np.uint16, 0x7C00, 0x03FF, 0x8000)}
    if x.dtype not in layout:
        return x
    u, exp, mant, sign = layout[x.dtype]
    bits = x.view(u).copy()
    pick = rng.random(x.shape) < 0.05
    payload = rng.integers(1, mant, size=x.shape, endpoint=True)
    sgn = np.where(rng.random(x.shape) < 0.5, sign, 0)
    bits[pick] = (exp | payload[pick] | sgn[pick]).astype(u)
    return bits.view(x.dtype)


@SETTINGS
@given(shape=tile_shapes(max_free=512), src=st.sampled_from(ALL), dst=st.sampled_from(ALL),
       route=st.sampled_from(["hbm->sbuf->hbm", "hbm->hbm", "sbuf->sbuf"]), seed=seeds)
def test_dma_copy_routes_and_casts(shape, src, dst, route, seed):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    if src.kind in "iu":
        info = np.iinfo(src)
        x = rand_int(rng, shape, src, lo=max(info.min, -2 ** 24), hi=min(info.max, 2 ** 24))
    else:
        x = _nan_payloads(rng, rand_float(rng, shape, src, special=0.05, scale_exp=(-4, 10)))

    @nki.jit
    def k(xin):
        out = nl.ndarray(shape, dtype=dst, buffer=nl.shared_hbm)
        if route == "hbm->hbm":
            nisa.dma_copy(dst=out, src=xin)
        elif route == "hbm->sbuf->hbm":
            t = nl.ndarray(shape, dtype=dst, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=xin)
            nisa.dma_copy(dst=out, src=t)
        else:
            a = nl.ndarray(shape, dtype=src, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=xin)
            b = nl.ndarray(shape, dtype=dst, buffer=nl.sbuf)
            nisa.dma_copy(dst=b, src=a)
            nisa.dma_copy(dst=out, src=b)
        return out

    got = run(k, x)
    ref = x.copy() if src == dst else write(f64(x), dst)
    assert_exact(got, ref)


@SETTINGS
@given(shape=tile_shapes(max_free=512), dt=st.sampled_from(FLOATS), sd=st.sampled_from(FLOATS),
       seed=seeds, to_hbm=st.booleans(), n=st.integers(1, 3))
def test_dma_copy_dst_rmw_add(shape, dt, sd, seed, to_hbm, n):
    """dst_rmw_op=np.add: dst = dst + src, computed in fp32 and written in dst's dtype."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    base_ = rand_float(rng, shape, dt, scale_exp=(-2, 3))
    srcs = [rand_float(rng, shape, sd, scale_exp=(-2, 3)) for _ in range(n)]

    @nki.jit
    def k(b, *xs):
        out = nl.ndarray(shape, dtype=dt, buffer=nl.shared_hbm)
        if to_hbm:
            nisa.dma_copy(dst=out, src=b)
            for x in xs:
                nisa.dma_copy(dst=out, src=x, dst_rmw_op=np.add)
        else:
            acc = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=acc, src=b)
            for x in xs:
                t = nl.load(x)
                nisa.dma_copy(dst=acc, src=t, dst_rmw_op=np.add)
            nisa.dma_copy(dst=out, src=acc)
        return out

    got = run(k, base_, *srcs)
    acc = f64(base_)
    for x in srcs:
        acc = f64(write(acc + f64(x), dt))
    assert_exact(got, acc.astype(dt))


# --------------------------------------------------------------------------------------------
# transposes

PERMS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@SETTINGS
@given(nd=st.sampled_from([2, 3, 4]), data=st.data(), dt=st.sampled_from([F32, BF16, F16]),
       seed=seeds, from_sbuf=st.booleans(), give_axes=st.booleans())
def test_dma_transpose(nd, data, dt, seed, from_sbuf, give_axes):
    """Permutations [1,0], [2,1,0], [3,1,2,0]; bit-accurate for 2- and 4-byte types [ARCH3]."""
    nki, nl, nisa = legacy()
    if nd == 2:
        shape = (data.draw(st.integers(1, 128)), data.draw(st.integers(1, 128)))
    elif nd == 3:
        shape = (data.draw(st.integers(1, 16)), data.draw(st.integers(1, 8)),
                 data.draw(st.integers(1, 128)))
    else:
        shape = (data.draw(st.integers(1, 8)), data.draw(st.integers(1, 4)),
                 data.draw(st.integers(1, 4)), data.draw(st.integers(1, 128)))
    if from_sbuf:
        assume(shape[0] <= 128)
    rng = np.random.default_rng(seed)
    x = _nan_payloads(rng, rand_float(rng, shape, dt, special=0.05))
    axes = PERMS[nd]

    @nki.jit
    def k(xin):
        out = nl.ndarray(tuple(shape[a] for a in axes), dtype=dt, buffer=nl.shared_hbm)
        src = nl.load(xin) if from_sbuf else xin
        t = nisa.dma_transpose(src, axes=axes if give_axes else None)
        nl.store(out, value=t)
        return out

    got = run(k, x)
    assert_exact(got, np.transpose(x, axes).copy())


@SETTINGS
@given(a=st.integers(1, 512), b=st.integers(1, 128), dt=st.sampled_from(FLOATS + (I32,)),
       seed=seeds, out=st.sampled_from([None, F32, BF16]))
def test_load_transpose2d(a, b, dt, seed, out):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand(rng, (a, b), dt)

    @nki.jit
    def k(xin):
        od = out or dt
        o = nl.ndarray((b, a), dtype=od, buffer=nl.shared_hbm)
        nl.store(o, value=nl.load_transpose2d(xin, dtype=out))
        return o

    got = run(k, x)
    ref = x.T.copy() if out is None or out == dt else write(f64(x).T, out)
    assert_exact(got, ref)


# --------------------------------------------------------------------------------------------
# nl.load / nl.store: masks, dtype, tails

@SETTINGS
@given(N=st.integers(1, 300), F=st.integers(1, 64), dt=st.sampled_from(ALL), seed=seeds,
       ld=st.sampled_from([None, F32, BF16]))
def test_load_store_tiled_with_tail_mask(N, F, dt, seed, ld):
    """The canonical tail loop: tiles of 128 rows, the last one masked with i_p < N."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand(rng, (N, F), dt)
    od = ld or dt
    ntiles = (N + 127) // 128

    @nki.jit
    def k(xin):
        out = nl.ndarray((N, F), dtype=od, buffer=nl.shared_hbm)
        for i in nl.affine_range(ntiles):
            i_p = i * 128 + nl.arange(128)[:, None]
            i_f = nl.arange(F)[None, :]
            t = nl.load(xin[i_p, i_f], mask=(i_p < N), dtype=ld)
            nl.store(out[i_p, i_f], value=t, mask=(i_p < N))
        return out

    got = run(k, x)
    ref = x.copy() if od == dt else write(f64(x), od)
    assert_exact(got, ref)


@SETTINGS
@given(P=st.integers(1, 128), F=st.integers(1, 64), seed=seeds, dt=st.sampled_from(FLOATS),
       lo=st.integers(0, 64), hi=st.integers(0, 64), flo=st.integers(0, 32))
def test_store_mask_writes_only_selected_elements(P, F, seed, dt, lo, hi, flo):
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand_float(rng, (P, F), dt)
    fill = np.asarray(-1.0).astype(dt)

    @nki.jit
    def k(xin):
        out = nl.ndarray((P, F), dtype=dt, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.memset(shape=(P, F), value=-1.0, dtype=dt))
        i_p, i_f = nl.mgrid[0:P, 0:F]
        t = nl.load(xin)
        nl.store(out[i_p, i_f], value=t, mask=((i_p >= lo) & (i_p < P - hi) & (i_f >= flo)))
        return out

    got = run(k, x)
    ip, jf = np.mgrid[0:P, 0:F]
    m = (ip >= lo) & (ip < P - hi) & (jf >= flo)
    assert_exact(got, np.where(m, x, fill).astype(dt))


@SETTINGS
@given(N=st.integers(1, 400), P=st.integers(1, 128), F=st.integers(1, 48),
       dt=st.sampled_from(ALL), seed=seeds, masked=st.booleans())
def test_load_gather_with_index_tile(N, P, F, dt, seed, masked):
    """x[idx_tile, i_f]: row p of the result is x[idx[p], :] (indirect DMA on the partition dim);
    with a mask, masked-off rows may hold out-of-range indices."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    x = rand(rng, (N, F), dt)
    idx = rng.integers(0, N, size=(P, 1)).astype(np.int32)
    valid = P if not masked else int(rng.integers(0, P + 1))
    if masked:
        idx[valid:] = N + 1000  # out of bounds, never read

    @nki.jit
    def k(xin, iin):
        out = nl.ndarray((P, F), dtype=dt, buffer=nl.shared_hbm)
        z = nisa.memset(shape=(P, F), value=0, dtype=dt)
        nl.store(out, value=z)
        it = nl.load(iin)
        i_p = nl.arange(P)[:, None]
        i_f = nl.arange(F)[None, :]
        if masked:
            t = nl.load(xin[it, i_f], mask=(i_p < valid))
            nl.store(out[i_p, i_f], value=t, mask=(i_p < valid))
        else:
            nl.store(out, value=nl.load(xin[it, i_f]))
        return out

    got = run(k, x, idx)
    ref = np.zeros((P, F), dt)
    ref[:valid] = x[idx[:valid, 0]]
    assert_exact(got, ref)


@SETTINGS
@given(N=st.integers(1, 300), P=st.integers(1, 128), F=st.integers(1, 48),
       dt=st.sampled_from(ALL), seed=seeds)
def test_store_scatter_with_index_tile(N, P, F, dt, seed):
    """out[idx_tile, i_f] = t: row p of t lands in out[idx[p], :] (distinct indices)."""
    nki, nl, nisa = legacy()
    assume(P <= N)
    rng = np.random.default_rng(seed)
    t_host = rand(rng, (P, F), dt)
    idx = rng.permutation(N)[:P].reshape(P, 1).astype(np.int32)
    base_ = rand(rng, (N, F), dt)

    @nki.jit
    def k(tin, iin, bin_):
        out = nl.ndarray((N, F), dtype=dt, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=bin_)
        it = nl.load(iin)
        i_f = nl.arange(F)[None, :]
        nl.store(out[it, i_f], value=nl.load(tin))
        return out

    got = run(k, t_host, idx, base_)
    ref = base_.copy()
    ref[idx[:, 0]] = t_host
    assert_exact(got, ref)


def test_unmasked_out_of_bounds_gather_is_an_error():
    from trnsim.errors import OutOfBoundsError
    nki, nl, nisa = legacy()

    @nki.jit
    def k(xin, iin):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        it = nl.load(iin)
        nl.store(out, value=nl.load(xin[it, nl.arange(8)[None, :]]))
        return out

    with pytest.raises(OutOfBoundsError):
        run(k, np.zeros((10, 8), np.float32), np.array([[0], [1], [2], [10]], np.int32))


def test_store_from_psum_goes_through_sbuf():
    nki, nl, nisa = legacy()
    a = np.arange(16, dtype=np.float32).reshape(4, 4)

    @nki.jit
    def k(ain):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(ain)
        ident = nl.shared_constant(np.eye(4, dtype=np.float32))
        nl.store(out, value=nisa.nc_matmul(t, nl.load(ident)))
        return out

    assert_exact(run(k, a), a.T.copy())


@SETTINGS
@given(P=st.integers(1, 128), A=st.integers(1, 16), B=st.integers(1, 16),
       dt=st.sampled_from(ALL), st_dt=st.sampled_from(ALL), seed=seeds)
def test_dma_copy_reshapes_and_store_casts(P, A, B, dt, st_dt, seed):
    """dma_copy needs equal element counts only (row-major order); nl.store of a tile into an
    HBM tensor of another dtype casts through fp32."""
    nki, nl, nisa = legacy()
    rng = np.random.default_rng(seed)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = rand_int(rng, (P, A * B), dt, lo=max(info.min, -2 ** 24), hi=min(info.max, 2 ** 24))
    else:
        x = rand_float(rng, (P, A * B), dt, special=0.05)

    @nki.jit
    def k(xin):
        out = nl.ndarray((P, A, B), dtype=st_dt, buffer=nl.shared_hbm)
        t = nl.ndarray((P, A, B), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=xin)
        nl.store(out, value=t)
        return out

    got = run(k, x)
    ref = x.reshape(P, A, B)
    ref = ref.copy() if st_dt == dt else write(f64(ref), st_dt)
    assert_exact(got, ref)
