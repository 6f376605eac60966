"""Reference streaming kernels over a [rows, cols] tensor: binary add / mul, an activation (SiLU or
GELU), a fused SwiGLU (silu(gate) * up) and an AdamW step.

Rows go on the 128 partitions, columns are cut into chunks of at most ``FC`` elements so a tile
stays small in SBUF; every loop is an ``affine_range``, so loads, compute and stores pipeline.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def binary_kernel(x, y, TP=128, FC=2048, op="add"):
    """out = x + y (op="add") or x * y (op="mul"), elementwise."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    fn = nl.add if op == "add" else nl.multiply
    for i in nl.affine_range(rows // TP):
        for j in nl.affine_range(cols // FC):
            a = nl.load(x[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC])
            b = nl.load(y[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC])
            nl.store(out[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC], value=fn(a, b, dtype=x.dtype))
    return out


@nki.jit
def activation_kernel(x, TP=128, FC=2048, fn="silu"):
    """out = silu(x) or gelu(x) on the Scalar engine's activation table."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    op = nl.silu if fn == "silu" else nl.gelu
    for i in nl.affine_range(rows // TP):
        for j in nl.affine_range(cols // FC):
            a = nl.load(x[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC])
            nl.store(out[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC],
                     value=nisa.activation(op, a, dtype=x.dtype))
    return out


@nki.jit
def swiglu_kernel(gate, up, TP=128, FC=2048):
    """out = silu(gate) * up: the activation on Scalar, the product on Vector."""
    rows, cols = gate.shape
    out = nl.ndarray((rows, cols), dtype=gate.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // TP):
        for j in nl.affine_range(cols // FC):
            g = nl.load(gate[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC])
            u = nl.load(up[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC])
            s = nisa.activation(nl.silu, g, dtype=nl.float32)
            nl.store(out[i * TP:(i + 1) * TP, j * FC:(j + 1) * FC],
                     value=nl.multiply(s, u, dtype=gate.dtype))
    return out


@nki.jit
def adamw_kernel(p, g, m, v, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01, step=1,
                 TP=128, FC=2048):
    """One AdamW step on fp32 master weights: returns (p', m', v') (bias-corrected, decoupled decay)."""
    rows, cols = p.shape
    p_out = nl.ndarray((rows, cols), dtype=p.dtype, buffer=nl.shared_hbm)
    m_out = nl.ndarray((rows, cols), dtype=m.dtype, buffer=nl.shared_hbm)
    v_out = nl.ndarray((rows, cols), dtype=v.dtype, buffer=nl.shared_hbm)
    c1 = 1.0 / (1.0 - beta1 ** step)
    c2 = 1.0 / (1.0 - beta2 ** step)
    for i in nl.affine_range(rows // TP):
        for j in nl.affine_range(cols // FC):
            sl = (slice(i * TP, (i + 1) * TP), slice(j * FC, (j + 1) * FC))
            pt = nl.load(p[sl])
            gt = nl.load(g[sl], dtype=nl.float32)
            mt = nl.load(m[sl])
            vt = nl.load(v[sl])
            m1 = nisa.scalar_tensor_tensor(data=mt, op0=nl.multiply, operand0=beta1, op1=nl.add,
                                           operand1=nl.multiply(gt, 1.0 - beta1))
            g2 = nl.multiply(nl.multiply(gt, gt), 1.0 - beta2)
            v1 = nisa.scalar_tensor_tensor(data=vt, op0=nl.multiply, operand0=beta2, op1=nl.add,
                                           operand1=g2)
            den = nisa.activation(nl.sqrt, v1, scale=c2)
            den = nl.reciprocal(nl.add(den, eps))
            upd = nl.multiply(nl.multiply(m1, den), c1 * lr)
            p1 = nisa.scalar_tensor_tensor(data=pt, op0=nl.multiply, operand0=1.0 - lr * wd,
                                           op1=nl.subtract, operand1=upd)
            nl.store(p_out[sl], value=p1)
            nl.store(m_out[sl], value=m1)
            nl.store(v_out[sl], value=v1)
    return p_out, m_out, v_out
