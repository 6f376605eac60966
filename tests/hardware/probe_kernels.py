"""Probe kernels for tests/hardware/test_override_effects.py: small legacy-API kernels that put
every engine, the PE's matmul modes, DMA sizes and DMA transposes on the timing model."""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def mm(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(4):
        a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
        b = nl.load(rhs[k * 128:(k + 1) * 128, :])
        acc += nisa.nc_matmul(a, b)
    nl.store(out, nl.copy(acc, dtype=nl.float32))
    return out


def mm_long(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhsT[0:128, :])
    b = nl.load(rhs[0:128, :])
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.sequential_range(400):
        acc += nisa.nc_matmul(a, b)
    nl.store(out, nl.copy(acc, dtype=nl.float32))
    return out


def onezero(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(lhsT[0:128, :])
    b = nl.load(rhs[0:128, :])
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(a, b, is_stationary_onezero=True)
    nl.store(out, nl.copy(acc, dtype=nl.float32))
    return out


def engines(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nisa.tensor_tensor(t, t, op=nl.add)
    v = nisa.tensor_copy(u)
    w = nisa.tensor_scalar(v, nl.multiply, 2.0)
    x = nisa.activation(op=nl.exp, data=w)
    red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    y = nisa.activation_reduce(op=nl.exp, data=x, reduce_op=nl.add, reduce_res=red)
    z = nisa.tensor_tensor(y, y, op=nl.multiply, engine=nisa.gpsimd_engine)
    s = nisa.tensor_copy(z[:, 0:512:2])
    sa = nisa.activation(op=nl.exp, data=z[:, 0:512:2])   # a strided ScalarE read
    p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    q = nisa.tensor_tensor(p, z, op=nl.add)
    r = nisa.activation(op=nl.exp, data=p)
    tr = nisa.nc_transpose(t[:, 0:128])
    nl.store(out[:, 0:256], s)
    nl.store(out[:, 256:512], sa)
    nl.store(out, nl.add(q, r))
    nl.store(out[:, 0:128], nl.copy(tr, dtype=a.dtype))
    return out


def dmas(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    small = nl.load(a[:, 0:64])
    big = nl.load(a)
    nl.store(out[:, 0:64], small)
    nl.store(out, big)
    return out


def dma_tr(a):
    out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nisa.dma_transpose(a[0:128, 0:128])
    nl.store(out, t)
    return out


def masked(a):
    """Partial tiles: masked ops on Vector, Scalar and GpSimd touching 100 of 512 columns."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    m = i_f < 100
    u = nisa.tensor_copy(t, mask=m, engine=nisa.vector_engine)
    v = nisa.activation(op=nl.exp, data=u, mask=m)
    w = nisa.tensor_tensor(v, v, op=nl.add, mask=m, engine=nisa.gpsimd_engine)
    nl.store(out[i_p, i_f], w, mask=m)
    return out
