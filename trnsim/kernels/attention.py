"""Reference flash-style attention forward for one head (the layout of the public NKI flash kernels):
qT [d, Sq], kT [d, Skv] (head dim on the partitions, so QK^T contracts over d), v [Skv, d].

K^T and V are loaded into SBUF once per head.  Query tiles of TQ rows are processed G at a time,
and each step of the key loop is written stage by stage across the G tiles (all G score matmuls,
then all G row maxima, all G exponentials, ...): the engines run their queues in program order, so
this is what lets the PE array work on one tile while Scalar and Vector finish another.
Per key tile of TK (<= 512) columns: S = Q K^T in PSUM, running max and row sum (online softmax),
P transposed 128 columns at a time on the PE array and multiplied by V into PSUM, the [TQ, d]
accumulator rescaled by exp(m_old - m_new).  Causal: key tiles past a group's last query row are
skipped and tiles crossing the diagonal masked with ``affine_select``; with Sq < Skv the queries
are the last Sq positions (a prefill chunk after a cached prefix).
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

NEG = -30000.0  # "minus infinity" that stays finite in bf16 and fp32 arithmetic


@nki.jit
def flash_fwd_kernel(qT, kT, v, causal=False, TQ=128, TK=512, G=4):
    """softmax(Q K^T / sqrt(d)) V for one head; returns [Sq, d] in the input dtype."""
    d, Sq = qT.shape
    _, Skv = kT.shape
    out = nl.ndarray((Sq, d), dtype=qT.dtype, buffer=nl.shared_hbm)
    scale = 1.0 / float(d) ** 0.5
    VC = min(128, TK)  # P is transposed / multiplied in chunks of VC key rows
    NC = TK // VC
    ip, jf = nl.mgrid[0:TQ, 0:TK]
    k_sb = nl.ndarray((Skv // TK, nl.par_dim(d), TK), dtype=kT.dtype, buffer=nl.sbuf)
    v_sb = nl.ndarray((Skv // VC, nl.par_dim(VC), d), dtype=v.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(Skv // TK):
        k_sb[j] = nl.load(kT[:, j * TK:(j + 1) * TK])
    for c in nl.affine_range(Skv // VC):
        v_sb[c] = nl.load(v[c * VC:(c + 1) * VC, :])
    off = Skv - Sq  # causal: query r sits at key position r + off (queries end with the keys)
    for i in nl.affine_range(Sq // (TQ * G)):
        q = nl.ndarray((G, nl.par_dim(d), TQ), dtype=qT.dtype, buffer=nl.sbuf)
        m_run = nl.full((G, nl.par_dim(TQ), 1), NEG, dtype=nl.float32)
        l_run = nl.zeros((G, nl.par_dim(TQ), 1), dtype=nl.float32)
        o_acc = nl.zeros((G, nl.par_dim(TQ), d), dtype=nl.float32)
        for g in nl.affine_range(G):
            q[g] = nl.load(qT[:, (i * G + g) * TQ:(i * G + g + 1) * TQ])
        last_row = (i * G + G) * TQ - 1 + off
        n_kv = max(1, min(Skv // TK, last_row // TK + 1)) if causal else Skv // TK
        for j in nl.sequential_range(n_kv):
            s = nl.ndarray((G, nl.par_dim(TQ), TK), dtype=nl.float32, buffer=nl.psum)
            m_new = nl.ndarray((G, nl.par_dim(TQ), 1), dtype=nl.float32, buffer=nl.sbuf)
            neg = nl.ndarray((G, nl.par_dim(TQ), 1), dtype=nl.float32, buffer=nl.sbuf)
            alpha = nl.ndarray((G, nl.par_dim(TQ), 1), dtype=nl.float32, buffer=nl.sbuf)
            rs = nl.ndarray((G, nl.par_dim(TQ), 1), dtype=nl.float32, buffer=nl.sbuf)
            p = nl.ndarray((G, nl.par_dim(TQ), TK), dtype=qT.dtype, buffer=nl.sbuf)
            pT = nl.ndarray((G * NC, nl.par_dim(VC), TQ), dtype=qT.dtype, buffer=nl.sbuf)
            for g in nl.affine_range(G):
                s[g] = nisa.nc_matmul(q[g], k_sb[j])
            for g in nl.affine_range(G):
                row0 = (i * G + g) * TQ + off
                if causal and j * TK + TK - 1 > row0:
                    s[g] = nisa.affine_select(pred=(row0 + ip >= j * TK + jf), on_true_tile=s[g],
                                              on_false_value=NEG, dtype=nl.float32)
                mx = nisa.tensor_reduce(nl.max, s[g], axis=(1,), keepdims=True, dtype=nl.float32)
                m_new[g] = nl.maximum(m_run[g], mx)
                neg[g] = nl.multiply(m_new[g], -scale)
            for g in nl.affine_range(G):
                p[g] = nisa.activation(nl.exp, s[g], bias=neg[g], scale=scale, reduce_op=nl.add,
                                       reduce_res=rs[g], dtype=qT.dtype)
                alpha[g] = nisa.activation(nl.exp, m_run[g], bias=neg[g], scale=scale)
            for g in nl.affine_range(G):
                for c in nl.affine_range(NC):
                    # PSUM -> SBUF evacuations alternate between Vector and Scalar, which is
                    # otherwise the less loaded of the two
                    eng = nisa.scalar_engine if c % 2 else nisa.vector_engine
                    pT[g * NC + c] = nisa.tensor_copy(nisa.nc_transpose(p[g, :, c * VC:(c + 1) * VC]),
                                                      dtype=qT.dtype, engine=eng)
            for g in nl.affine_range(G):
                l_run[g] = nisa.scalar_tensor_tensor(data=l_run[g], op0=nl.multiply, operand0=alpha[g],
                                                     op1=nl.add, operand1=rs[g])
                m_run[g] = nl.copy(m_new[g])
            for g in nl.affine_range(G):
                pv = nl.zeros((TQ, d), nl.float32, buffer=nl.psum)
                for c in nl.affine_range(NC):
                    pv += nisa.nc_matmul(pT[g * NC + c], v_sb[j * NC + c])
                o_acc[g] = nisa.scalar_tensor_tensor(data=o_acc[g], op0=nl.multiply, operand0=alpha[g],
                                                     op1=nl.add, operand1=pv)
        for g in nl.affine_range(G):
            r = nl.reciprocal(l_run[g])
            nl.store(out[(i * G + g) * TQ:(i * G + g + 1) * TQ, :],
                     value=nisa.tensor_scalar(o_acc[g], nl.multiply, r, dtype=qT.dtype))
    return out
