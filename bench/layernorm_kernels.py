"""Our LayerNorm kernels following the trn1 LayerNorm tutorial's description (calibration rows
K038/K039): v1 uses nki.language only (mean, E[x^2] - mean^2, rsqrt); v2 computes the statistics
with nisa.bn_stats / bn_aggr and normalizes with one tensor_scalar."""
import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def layernorm_v1(x, epsilon, gamma, beta):
    rows, F = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    g = nl.load(gamma.reshape((1, F))).broadcast_to((P, F))
    b = nl.load(beta.reshape((1, F))).broadcast_to((P, F))
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    for i in nl.affine_range(math.ceil(rows / P)):
        t = nl.load(x[i * P + ip, jf], mask=(i * P + ip < rows))
        mean = nl.mean(t, axis=1)
        var = nl.mean(nl.square(t), axis=1) - mean * mean
        y = (t - mean) * nl.rsqrt(var + epsilon)
        y = y * g + b
        nl.store(out[i * P + ip, jf], value=y, mask=(i * P + ip < rows))
    return out


@nki.jit
def layernorm_v2(x, epsilon, gamma, beta):
    rows, F = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    FB = nl.tile_size.bn_stats_fmax
    nchunks = math.ceil(F / FB)
    g = nl.load(gamma.reshape((1, F))).broadcast_to((P, F))
    b = nl.load(beta.reshape((1, F))).broadcast_to((P, F))
    ip = nl.arange(P)[:, None]
    jf = nl.arange(F)[None, :]
    for i in nl.affine_range(math.ceil(rows / P)):
        t = nl.load(x[i * P + ip, jf], mask=(i * P + ip < rows))
        stats = nl.ndarray((P, 6 * nchunks), dtype=nl.float32)
        for j in nl.affine_range(nchunks):
            w = min(FB, F - j * FB)
            stats[:, j * 6:(j + 1) * 6] = nisa.bn_stats(t[:, j * FB:j * FB + w], dtype=nl.float32)
        mv = nisa.bn_aggr(stats)
        mean = mv[:, 0:1]
        rstd = nl.rsqrt(mv[:, 1:2] + epsilon)
        y = nisa.tensor_scalar(t, nl.subtract, mean, op1=nl.multiply, operand1=rstd)
        y = y * g + b
        nl.store(out[i * P + ip, jf], value=y, mask=(i * P + ip < rows))
    return out
