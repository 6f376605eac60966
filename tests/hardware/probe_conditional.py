"""Probe kernels (new NKI API) for the timing figures the general probes cannot reach
(tests/hardware/test_override_conditional.py): each one issues the instruction under which the
timing model reads its figure."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def narrow_mm(a, b):
    """Matmuls with 32 moving columns (below mm_init_cycles) and an alternating stationary."""
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    s0 = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    s1 = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    m = nl.ndarray((128, 32), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s0, src=a)
    nisa.dma_copy(dst=s1, src=a)
    nisa.dma_copy(dst=m, src=b)
    acc = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.psum)
    for i in range(16):
        nisa.nc_matmul(dst=acc, stationary=s0 if i % 2 else s1, moving=m, accumulate=i > 0)
    r = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def double_row_mm(a, b):
    """An fp8 perf_mode double_row matmul (K = 256 in one pass)."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((128, 2, 128), dtype=a.dtype, buffer=nl.sbuf)
    m = nl.ndarray((128, 2, 512), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for i in range(8):
        nisa.nc_matmul(dst=acc, stationary=s, moving=m, perf_mode=nisa.matmul_perf_mode.double_row,
                       accumulate=i > 0)
    r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def fp32_pe_transpose(a):
    """fp32 transposes on the PE (nc_matmul is_transpose), back to back."""
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    for _ in range(8):
        nisa.nc_transpose(dst=acc, data=t, engine=nisa.tensor_engine)
    r = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def tiny_ops(a):
    """Independent one-element instructions on Vector, Scalar and GpSimd (issue-bound)."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    outs = []
    for eng in (nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine):
        for _ in range(16):
            r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=t, engine=eng)
            outs.append(r)
    nisa.dma_copy(dst=out, src=outs[-1])
    return out


@nki.jit
def act_copy(a):
    """bf16 / fp8 copies on ScalarE and VectorE (the 16-bit fast paths)."""
    out = nl.ndarray((128, 2048), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2048), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 2048), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t, engine=nisa.scalar_engine)
    v = nl.ndarray((128, 2048), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v, src=u, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=v)
    return out


@nki.jit
def hwdge_dma(a):
    """Small DMAs through the hardware DGE (fixed cost dominated)."""
    out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge)
    nisa.dma_copy(dst=out, src=t, dge_mode=nisa.dge_mode.hwdge)
    return out


@nki.jit
def sbuf_dma_transpose(a):
    """A DMA transpose whose source is already in SBUF."""
    out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=u, src=t)
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def vector_and_gpsimd(a):
    """Independent Vector and GpSimd work on SBUF at the same time (the shared SBUF port)."""
    out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    last = None
    for i in range(8):
        v = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=v, data1=t, data2=t, op=nl.add,
                           engine=nisa.vector_engine if i % 2 else nisa.gpsimd_engine)
        last = v
    nisa.dma_copy(dst=out, src=last)
    return out


@nki.jit
def vector_and_scalar_psum(a):
    """Independent Vector and Scalar reads of one PSUM tile at the same time (the shared PSUM port)."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=t, engine=nisa.vector_engine)
    last = None
    for i in range(8):
        v = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        if i % 2:
            nisa.tensor_copy(dst=v, src=p, engine=nisa.vector_engine)
        else:
            nisa.activation(dst=v, op=nl.exp, data=p)
        last = v
    nisa.dma_copy(dst=out, src=last)
    return out


@nki.jit
def mm_then_wait(a, b):
    """Matmul / evacuate chains: the PE works part of each throttle window (utilization ~40 %)."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    m = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    nisa.dma_copy(dst=m, src=b)
    for _ in range(40):
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=s, moving=m)
        m2 = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
        nisa.activation(dst=m2, op=nl.exp, data=acc)
        nisa.activation(dst=m2, op=nl.exp, data=m2)
        m = m2
    nisa.dma_copy(dst=out, src=m)
    return out


@nki.jit
def mx_mm(sw, ssc, mw, msc):
    """nc_matmul_mx (v4): x4 fp8 data with uint8 scales, repeated."""
    K, M = sw.shape
    N = mw.shape[1]
    s = nl.ndarray((K, M), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=sw)
    m = nl.ndarray((K, N), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    nisa.dma_copy(dst=m, src=mw)
    ss = nl.ndarray(ssc.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=ss, src=ssc)
    ms = nl.ndarray(msc.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=ms, src=msc)
    ps = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for i in range(8):
        nisa.nc_matmul_mx(dst=ps, stationary=s, moving=m, stationary_scale=ss, moving_scale=ms,
                          accumulate=i > 0)
    sb = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=sb)
    return out


@nki.jit
def store_before_load(a, b):
    """A store that waits on compute, then (program order) a long load with no inputs: the load
    cannot fit the queues' gap before the store, so only the DMA trigger order moves it ahead."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 8192), dtype=b.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t, engine=nisa.vector_engine)
    nisa.dma_copy(dst=out, src=u)
    v = nl.ndarray((128, 8192), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b)
    w = nl.ndarray((128, 8192), dtype=b.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=w, src=v, engine=nisa.gpsimd_engine)   # not on Vector's window
    nisa.dma_copy(dst=out2, src=w)
    return out, out2
