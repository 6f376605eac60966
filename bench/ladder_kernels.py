"""Our own versions of the public matmul optimization ladders (written from the tutorials'
descriptions, not copied):

trn1 ladder (legacy ``neuronxcc.nki`` API, bf16; NKI matmul tutorial, Neuron 2.20 - 2.26):
  1. tiled            - 128x128 stationary / 128x512 moving tiles, both loaded inside the K loop
  2. hoist_load       - the lhsT column block loaded once per m, the rhs column block once per (m, n)
  3. block_free_dims  - 2 x 2 blocks of (M, N) tiles share their loads
  4. fully_optimized  - M, N and K blocked (16, 2, 8 tiles), partial sums accumulated in SBUF

trn2 ladder (new ``nki`` API, fp32 inputs; kernel-optimization guide): v2 tiled, v3 hoisted loads,
v4 blocked free dims, v5 blocked K, with the same structure.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512


@nki.jit
def trn1_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                b = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                acc += nisa.nc_matmul(a, b)
            nl.store(out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def trn1_hoist_load(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        a = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            a[k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            b = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TILE_K):
                b[k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                acc += nisa.nc_matmul(a[k], b[k])
            nl.store(out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def trn1_block_free_dims(lhsT, rhs, BM=2, BN=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (TILE_M * BM)):
        a = nl.ndarray((BM, KT, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(BM):
            col = (m * BM + bm) * TILE_M
            for k in nl.affine_range(KT):
                a[bm, k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_M])
        for n in nl.affine_range(N // (TILE_N * BN)):
            b = nl.ndarray((BN, KT, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(BN):
                col = (n * BN + bn) * TILE_N
                for k in nl.affine_range(KT):
                    b[bn, k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(KT):
                        acc += nisa.nc_matmul(a[bm, k], b[bn, k])
                    r0, c0 = (m * BM + bm) * TILE_M, (n * BN + bn) * TILE_N
                    nl.store(out[r0:r0 + TILE_M, c0:c0 + TILE_N], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def trn1_fully_optimized(lhsT, rhs, BM=16, BN=2, BK=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    BLOCK_M, BLOCK_N, BLOCK_K = TILE_M * BM, TILE_N * BN, TILE_K * BK
    NM, NN, NK = M // BLOCK_M, N // BLOCK_N, K // BLOCK_K
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(NN):
        # partial sums of every (m, bm, bn) tile of this column block, accumulated in SBUF
        res = nl.zeros((NM, BM, BN, nl.par_dim(TILE_M), TILE_N), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.sequential_range(NK):
            b = nl.ndarray((BK, nl.par_dim(TILE_K), BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(BK):
                r0 = (k * BK + bk) * TILE_K
                b[bk] = nl.load(rhs[r0:r0 + TILE_K, n * BLOCK_N:(n + 1) * BLOCK_N])
            for m in nl.affine_range(NM):
                a = nl.ndarray((BK, nl.par_dim(TILE_K), BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(BK):
                    r0 = (k * BK + bk) * TILE_K
                    a[bk] = nl.load(lhsT[r0:r0 + TILE_K, m * BLOCK_M:(m + 1) * BLOCK_M])
                for bn in nl.affine_range(BN):
                    for bm in nl.affine_range(BM):
                        acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(BK):
                            acc += nisa.nc_matmul(a[bk, :, bm * TILE_M:(bm + 1) * TILE_M],
                                                  b[bk, :, bn * TILE_N:(bn + 1) * TILE_N])
                        res[m, bm, bn] = nl.add(res[m, bm, bn], acc, dtype=res.dtype)
        for m in nl.affine_range(NM):
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    r0 = m * BLOCK_M + bm * TILE_M
                    c0 = n * BLOCK_N + bn * TILE_N
                    nl.store(out[r0:r0 + TILE_M, c0:c0 + TILE_N], value=res[m, bm, bn])
    return out


TRN1_LADDER = [("tiled", trn1_tiled, ("K001", "K002")),
               ("hoist_load", trn1_hoist_load, ("K003", "K004")),
               ("block_free_dims", trn1_block_free_dims, ("K005", "K006")),
               ("fully_optimized", trn1_fully_optimized, ("K007", "K008"))]
