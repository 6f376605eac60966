"""Reference matmul: C[m, n] = A[m, k] @ B[k, n], A given transposed as lhsT [k, m] (the layout the
Tensor engine takes its stationary operand in; the Neuron compiler arranges the same).

Blocking (textbook GEMM blocking, sized for SBUF/PSUM): an output block of SM row tiles x BN column
tiles (128 x 512 each) is accumulated in fp32 in SBUF over K blocks of BK x 128 rows.  Per K
block, one [BK*128, SM*128] block of lhsT and one [BK*128, BN*512] block of rhs are loaded, each
(row tile, column tile) pair sums its BK matmuls in a PSUM bank and the Vector engine adds the bank
into the SBUF block.  rhs is read M / (SM*128) times and lhsT N / (BN*512) times, so with SM = 16
a 4096-row operand streams rhs twice instead of once per 128 rows.  Loops over blocks are
``affine_range`` (loads of the next block overlap the matmuls of this one); the K-block loop is
``sequential_range`` because the SBUF block carries the sum.  With ``HOLD_A`` (a row block of lhsT
that fits in SBUF for the whole K: decode, small and mid batches) lhsT is loaded once, during the first
column block, and the other column blocks reuse it, so only the weights stream.  With ``KP`` (the
weights' rows are narrow: under 2 KiB per partition, e.g. a [4096, 128] value cache) each K block of
rhs is one DMA, partition-major (partition p takes the block's BK consecutive rows), so a descriptor
moves BK rows instead of one row of a few hundred bytes; lhsT's K tiles take the same rows (one
partition-major DMA too when its rows are narrow as well, ``KP = 2``; else BK DMAs of strided rows).
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def _out_block(lhsT, rhs, out, odt, m, n, held, fill, TM, TK, TN, SM, BN, BK, KP):
    """Output block (m, n): SM x BN tiles summed over K in an SBUF block, then stored.  lhsT comes
    from ``held`` (filled here, K block by K block, when ``fill``) or, without one, is loaded per K
    block.  ``KP``: K rows partition-major within a K block (row kb*WK + p*BK + bk on partition p)."""
    K = lhsT.shape[0]
    WM, WN, WK = TM * SM, TN * BN, TK * BK
    res = nl.zeros((SM * BN, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.sbuf)
    for kb in nl.sequential_range(K // WK):
        if KP:
            # rhs in one DMA, each partition one contiguous run of its BK rows; lhsT's K tile bk takes
            # the same rows (every BK-th from bk), so the sum over K is unchanged
            # (narrow lhsT rows too, ``KP == 2``: lhsT the same way, one DMA)
            if held is None and KP == 2:
                a = nl.load(lhsT[kb * WK:(kb + 1) * WK, m * WM:(m + 1) * WM].reshape((TK, BK, WM)))
            elif held is None:
                a = nl.ndarray((BK, nl.par_dim(TK), WM), dtype=lhsT.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(BK):
                rows = lhsT[kb * WK + bk:(kb + 1) * WK:BK, m * WM:(m + 1) * WM]
                if held is None and KP == 1:
                    a[bk] = nl.load(rows)
                elif held is not None and fill:
                    held[kb * BK + bk] = nl.load(rows)
            b = nl.load(rhs[kb * WK:(kb + 1) * WK, n * WN:(n + 1) * WN].reshape((TK, BK, WN)))
        else:
            if held is None:
                a = nl.ndarray((BK, nl.par_dim(TK), WM), dtype=lhsT.dtype, buffer=nl.sbuf)
            b = nl.ndarray((BK, nl.par_dim(TK), WN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(BK):
                r0 = (kb * BK + bk) * TK
                if held is None:
                    a[bk] = nl.load(lhsT[r0:r0 + TK, m * WM:(m + 1) * WM])
                elif fill:
                    held[kb * BK + bk] = nl.load(lhsT[r0:r0 + TK, m * WM:(m + 1) * WM])
                b[bk] = nl.load(rhs[r0:r0 + TK, n * WN:(n + 1) * WN])
        for i in nl.affine_range(SM):
            for j in nl.affine_range(BN):
                acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
                for bk in nl.affine_range(BK):
                    if held is not None:
                        st = held[kb * BK + bk]
                    else:
                        st = a[:, bk, :] if KP == 2 else a[bk]
                    mv = b[:, bk, j * TN:(j + 1) * TN] if KP else b[bk, :, j * TN:(j + 1) * TN]
                    acc += nisa.nc_matmul(st[:, i * TM:(i + 1) * TM], mv)
                res[i * BN + j] = nl.add(res[i * BN + j], acc, dtype=nl.float32)
    for i in nl.affine_range(SM):
        for j in nl.affine_range(BN):
            r0, c0 = m * WM + i * TM, n * WN + j * TN
            nl.store(out[r0:r0 + TM, c0:c0 + TN], value=nl.copy(res[i * BN + j], dtype=odt))


@nki.jit
def matmul_kernel(lhsT, rhs, TM=128, TK=128, TN=512, SM=1, BN=1, BK=1, HOLD_A=False, KP=0):
    """[k, m] x [k, n] -> [m, n] in the input dtype (fp32 for fp8 inputs), fp32 accumulation;
    ``HOLD_A``: each m block of lhsT is loaded once, during its first column block, and reused by
    the others; ``KP``: each K block of rhs (1) or of both operands (2) loaded partition-major (narrow
    rows).  Batched: [b, k, m] x [b, k, n] -> [b, m, n], the b products independent iterations of one
    kernel (a framework's batched matmul), so one's loads overlap another's matmuls."""
    odt = nl.float32 if lhsT.dtype in (nl.float8_e4m3, nl.float8_e5m2) else lhsT.dtype
    dims = dict(TM=TM, TK=TK, TN=TN, SM=SM, BN=BN, BK=BK, KP=KP)
    if len(lhsT.shape) == 3:
        out = nl.ndarray((lhsT.shape[0], lhsT.shape[2], rhs.shape[2]), dtype=odt, buffer=nl.shared_hbm)
        for bb in nl.affine_range(lhsT.shape[0]):
            _gemm(lhsT[bb], rhs[bb], out[bb], odt, HOLD_A, dims)
        return out
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=odt, buffer=nl.shared_hbm)
    _gemm(lhsT, rhs, out, odt, HOLD_A, dims)
    return out


def _gemm(lhsT, rhs, out, odt, HOLD_A, dims):
    """One [k, m] x [k, n] product into ``out`` (HBM), output block by output block."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    TM, TK, SM = dims["TM"], dims["TK"], dims["SM"]
    NN = N // (dims["TN"] * dims["BN"])
    for m in nl.affine_range(M // (TM * SM)):
        if HOLD_A:
            held = nl.ndarray((K // TK, nl.par_dim(TK), TM * SM), dtype=lhsT.dtype, buffer=nl.sbuf)
            _out_block(lhsT, rhs, out, odt, m, 0, held, True, **dims)
            for n in nl.affine_range(1, NN):
                _out_block(lhsT, rhs, out, odt, m, n, held, False, **dims)
        else:
            for n in nl.affine_range(NN):
                _out_block(lhsT, rhs, out, odt, m, n, None, False, **dims)
