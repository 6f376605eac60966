"""Reference row-wise kernels over x [rows, cols]: RMSNorm, LayerNorm and softmax along the columns.

Each row tile [128, cols] is loaded whole (the statistics need the full row), reduced on
Scalar/Vector, normalized and stored; the row-tile loop is an ``affine_range``.
"""
import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def rmsnorm_kernel(x, gamma, eps=1e-6, TP=128):
    """y = x / sqrt(mean(x^2) + eps) * gamma."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.load(gamma.reshape((1, cols))).broadcast_to((TP, cols))
    for i in nl.affine_range(rows // TP):
        t = nl.load(x[i * TP:(i + 1) * TP, :])
        ss = nl.ndarray((TP, 1), dtype=nl.float32)
        nisa.activation(nl.square, t, reduce_op=nl.add, reduce_res=ss, dtype=nl.float32)
        rstd = nisa.activation(nl.rsqrt, ss, scale=1.0 / cols, bias=nl.full((TP, 1), eps, nl.float32))
        y = nisa.tensor_scalar(t, nl.multiply, rstd, dtype=nl.float32)
        nl.store(out[i * TP:(i + 1) * TP, :], value=nl.multiply(y, g, dtype=x.dtype))
    return out


@nki.jit
def layernorm_kernel(x, gamma, beta, eps=1e-5, TP=128):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, statistics by bn_stats / bn_aggr."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    FB = nl.tile_size.bn_stats_fmax
    nch = math.ceil(cols / FB)
    g = nl.load(gamma.reshape((1, cols))).broadcast_to((TP, cols))
    b = nl.load(beta.reshape((1, cols))).broadcast_to((TP, cols))
    for i in nl.affine_range(rows // TP):
        t = nl.load(x[i * TP:(i + 1) * TP, :])
        stats = nl.ndarray((TP, 6 * nch), dtype=nl.float32)
        for c in nl.affine_range(nch):
            stats[:, c * 6:(c + 1) * 6] = nisa.bn_stats(t[:, c * FB:c * FB + min(FB, cols - c * FB)],
                                                         dtype=nl.float32)
        mv = nisa.bn_aggr(stats)
        rstd = nisa.activation(nl.rsqrt, mv[:, 1:2], bias=nl.full((TP, 1), eps, nl.float32))
        y = nisa.tensor_scalar(t, nl.subtract, mv[:, 0:1], op1=nl.multiply, operand1=rstd)
        y = nl.multiply(y, g, dtype=nl.float32)
        nl.store(out[i * TP:(i + 1) * TP, :], value=nl.add(y, b, dtype=x.dtype))
    return out


@nki.jit
def softmax_kernel(x, TP=128):
    """Row softmax: exp(x - max) / sum, the exponent and its row sum in one activation."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // TP):
        t = nl.load(x[i * TP:(i + 1) * TP, :])
        mx = nisa.tensor_reduce(nl.max, t, axis=(1,), negate=True, keepdims=True, dtype=nl.float32)
        s = nl.ndarray((TP, 1), dtype=nl.float32)
        e = nisa.activation(nl.exp, t, bias=mx, reduce_op=nl.add, reduce_res=s, dtype=nl.float32)
        r = nl.reciprocal(s)
        nl.store(out[i * TP:(i + 1) * TP, :], value=nisa.tensor_scalar(e, nl.multiply, r, dtype=x.dtype))
    return out
