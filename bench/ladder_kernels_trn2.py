"""Our versions of the trn2 kernel-optimization guide's matmul ladder (new ``nki`` API, written from
the guide's description): v2 tiled, v3 hoisted loads, v4 blocked free dims, v5 blocked K with SBUF
accumulation.  Inputs are fp32 as in the guide; PSUM accumulates with accumulate=None semantics
(the first write to a fresh PSUM tile overwrites)."""
import nki
import nki.isa as nisa
import nki.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512


@nki.jit
def v2_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            tmp = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=tmp, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=tmp)
    return result


@nki.jit
def v3_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        a_tiles = []
        for k in nl.affine_range(KT):
            a = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
            a_tiles.append(a)
        for n in nl.affine_range(N // TILE_N):
            b_tiles = []
            for k in nl.affine_range(KT):
                b = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                b_tiles.append(b)
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=acc, stationary=a_tiles[k], moving=b_tiles[k])
            tmp = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=tmp, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=tmp)
    return result


@nki.jit
def v4_blocked_free(lhsT, rhs, BM=2, BN=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (TILE_M * BM)):
        a_tiles = []
        for bm in nl.affine_range(BM):
            col = (m * BM + bm) * TILE_M
            row = []
            for k in nl.affine_range(KT):
                a = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_M])
                row.append(a)
            a_tiles.append(row)
        for n in nl.affine_range(N // (TILE_N * BN)):
            b_tiles = []
            for bn in nl.affine_range(BN):
                col = (n * BN + bn) * TILE_N
                row = []
                for k in nl.affine_range(KT):
                    b = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
                    row.append(b)
                b_tiles.append(row)
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(KT):
                        nisa.nc_matmul(dst=acc, stationary=a_tiles[bm][k], moving=b_tiles[bn][k])
                    tmp = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=tmp, src=acc)
                    r0, c0 = (m * BM + bm) * TILE_M, (n * BN + bn) * TILE_N
                    nisa.dma_copy(dst=result[r0:r0 + TILE_M, c0:c0 + TILE_N], src=tmp)
    return result


@nki.jit
def v5_blocked_k(lhsT, rhs, BM=16, BN=2, BK=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    BLOCK_M, BLOCK_N, BLOCK_K = TILE_M * BM, TILE_N * BN, TILE_K * BK
    NM, NN, NK = M // BLOCK_M, N // BLOCK_N, K // BLOCK_K
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for n in nl.affine_range(NN):
        sums = []
        for m in range(NM):
            sums.append([])
            for bm in range(BM):
                sums[m].append([])
                for bn in range(BN):
                    t = nl.ndarray((TILE_M, TILE_N), dtype=lhsT.dtype, buffer=nl.sbuf)
                    nisa.memset(dst=t, value=0.0)
                    sums[m][bm].append(t)
        for k in nl.sequential_range(NK):
            b_tiles = []
            for bk in range(BK):
                b = nl.ndarray((TILE_K, BLOCK_N), dtype=rhs.dtype, buffer=nl.sbuf)
                r0 = (BK * k + bk) * TILE_K
                nisa.dma_copy(dst=b, src=rhs[r0:r0 + TILE_K, BLOCK_N * n:BLOCK_N * (n + 1)])
                b_tiles.append(b)
            for m in nl.affine_range(NM):
                a_tiles = []
                for bk in nl.affine_range(BK):
                    a = nl.ndarray((TILE_K, BLOCK_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                    r0 = (BK * k + bk) * TILE_K
                    nisa.dma_copy(dst=a, src=lhsT[r0:r0 + TILE_K, BLOCK_M * m:BLOCK_M * (m + 1)])
                    a_tiles.append(a)
                for bn in nl.affine_range(BN):
                    for bm in nl.affine_range(BM):
                        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(BK):
                            nisa.nc_matmul(dst=acc,
                                           stationary=a_tiles[bk][0:TILE_K, bm * TILE_M:(bm + 1) * TILE_M],
                                           moving=b_tiles[bk][0:TILE_K, bn * TILE_N:(bn + 1) * TILE_N])
                        nisa.tensor_tensor(dst=sums[m][bm][bn], data1=sums[m][bm][bn], data2=acc,
                                           op=nl.add)
        for m in nl.affine_range(NM):
            for bm in nl.affine_range(BM):
                packed = nl.ndarray((TILE_M, BLOCK_N), dtype=nl.float32, buffer=nl.sbuf)
                for bn in nl.affine_range(BN):
                    nisa.tensor_copy(dst=packed[0:TILE_M, bn * TILE_N:(bn + 1) * TILE_N],
                                     src=sums[m][bm][bn])
                r0 = BM * TILE_M * m + bm * TILE_M
                nisa.dma_copy(dst=result[r0:r0 + TILE_M, BLOCK_N * n:BLOCK_N * (n + 1)], src=packed)
    return result


TRN2_LADDER = [("v2_tiled", v2_tiled, {"dma": "K040", "tensor": "K041"}),
               ("v3_hoisted", v3_hoisted, {"dma": "K042", "tensor": "K043"}),
               ("v4_blocked_free", v4_blocked_free, {"tensor": "K044", "dma": "K045"}),
               ("v5_blocked_k", v5_blocked_k, {"dma": "K046", "tensor": "K047", "vector": "K048"})]
