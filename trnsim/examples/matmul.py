"""A tiled bf16 matmul in the legacy NKI API: out[M, N] = lhsT.T @ rhs with fp32 PSUM accumulation.

Loads are hoisted per block and the K loop accumulates in one PSUM bank per (m, n) tile, the shape
of the NKI tutorial's optimized kernels.  Written for trnsim; imports the public module names, so
it runs unchanged on a Trainium host.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    """out[M, N] = lhsT.T @ rhs for lhsT [K, M], rhs [K, N] (multiples of 128, 128, 512)."""
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, "lhsT and rhs must share the contraction dim"
    TK, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        # the whole K x TM column block of lhsT stays in SBUF for every n
        lhs_tiles = nl.ndarray((K // TK, nl.par_dim(TK), TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TK):
            lhs_tiles[k] = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
        for n in nl.affine_range(N // TN):
            rhs_tiles = nl.ndarray((K // TK, nl.par_dim(TK), TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TK):
                rhs_tiles[k] = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                acc += nisa.nc_matmul(lhs_tiles[k], rhs_tiles[k])
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=res)
    return out
