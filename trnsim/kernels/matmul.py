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
column block, and the other column blocks reuse it, so only the weights stream.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def _out_block(lhsT, rhs, out, odt, m, n, held, fill, TM, TK, TN, SM, BN, BK):
    """Output block (m, n): SM x BN tiles summed over K in an SBUF block, then stored.  lhsT comes
    from ``held`` (filled here, K block by K block, when ``fill``) or, without one, is loaded per K
    block."""
    K = lhsT.shape[0]
    WM, WN, WK = TM * SM, TN * BN, TK * BK
    res = nl.zeros((SM * BN, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.sbuf)
    for kb in nl.sequential_range(K // WK):
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
                    st = a[bk] if held is None else held[kb * BK + bk]
                    acc += nisa.nc_matmul(st[:, i * TM:(i + 1) * TM], b[bk, :, j * TN:(j + 1) * TN])
                res[i * BN + j] = nl.add(res[i * BN + j], acc, dtype=nl.float32)
    for i in nl.affine_range(SM):
        for j in nl.affine_range(BN):
            r0, c0 = m * WM + i * TM, n * WN + j * TN
            nl.store(out[r0:r0 + TM, c0:c0 + TN], value=nl.copy(res[i * BN + j], dtype=odt))


@nki.jit
def matmul_kernel(lhsT, rhs, TM=128, TK=128, TN=512, SM=1, BN=1, BK=1, HOLD_A=False):
    """[k, m] x [k, n] -> [m, n] in the input dtype (fp32 for fp8 inputs), fp32 accumulation;
    ``HOLD_A``: each m block of lhsT is loaded once, during its first column block, and reused by
    the others."""
    K, M = lhsT.shape
    _, N = rhs.shape
    odt = nl.float32 if lhsT.dtype in (nl.float8_e4m3, nl.float8_e5m2) else lhsT.dtype
    out = nl.ndarray((M, N), dtype=odt, buffer=nl.shared_hbm)
    dims = dict(TM=TM, TK=TK, TN=TN, SM=SM, BN=BN, BK=BK)
    NN = N // (TN * BN)
    for m in nl.affine_range(M // (TM * SM)):
        if HOLD_A:
            held = nl.ndarray((K // TK, nl.par_dim(TK), TM * SM), dtype=lhsT.dtype, buffer=nl.sbuf)
            _out_block(lhsT, rhs, out, odt, m, 0, held, True, **dims)
            for n in nl.affine_range(1, NN):
                _out_block(lhsT, rhs, out, odt, m, n, held, False, **dims)
        else:
            for n in nl.affine_range(NN):
                _out_block(lhsT, rhs, out, odt, m, n, None, False, **dims)
    return out
