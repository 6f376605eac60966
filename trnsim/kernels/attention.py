"""Reference prefill attention forward for one head, on the schedule of the public NKI library's
context-encoding kernel: qT [d, Sq], kT [d, Skv] (head dim on the partitions, so QK^T contracts over
d), v [Skv, d].

K^T and V of a key section are loaded into SBUF once.  Each query group of TQ (128) rows takes a
whole-row softmax over the keys it can see: scores Q K^T per TK (512) key tile in PSUM, scaled and
row-max reduced into SBUF (tiles that cross the causal diagonal go through SBUF and a GpSimd
``affine_select`` first), the row max over all tiles, exp(s - max) per key tile on Scalar with its
row sum, each exp tile transposed by ONE SBUF->SBUF DMA transpose ([TQ, TK] -> [128, TK/128, TQ];
on NeuronCore-v2 by PE transposes of 128 keys), then P V accumulated in PSUM over LT keys (the
library's 2048: 4 key tiles) and added into an SBUF accumulator.  Q is loaded QLOAD groups at a time.
Causal: key tiles (and the 128-key P V chunks) that start past a group's last query row are skipped;
with Sq < Skv the queries are the last Sq positions (a prefill chunk after a cached prefix).

Three groups are in flight (software pipelining, in program order since each engine runs its queue in
order): while group i does P V and its write-back, group i+1 does its exponentials and transposes and
group i+2 its Q load and QK^T + max.  Above SECTION_THRESHOLD keys the keys go in sections of SEC: the
running max / sum rescale the partial output (flash attention), which is kept in an fp32 HBM scratch
between sections.  The registry passes LT, QLOAD, SEC and SECTION_THRESHOLD from
kernels/data/tiling.toml [attention]; left out, each is the unblocked case (one key tile per P V
accumulation, one group per Q load, one section).
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

NEG = -30000.0  # "minus infinity" that stays finite in bf16 and fp32 arithmetic


def _has(row_last, k0):
    """A key tile starting at k0 has a visible key for a query group whose last row sits at row_last."""
    return row_last >= k0


@nki.jit
def flash_fwd_kernel(qT, kT, v, causal=False, TQ=128, TK=512, LT=None, QLOAD=None, SEC=None,
                     SECTION_THRESHOLD=None):
    """softmax(Q K^T / sqrt(d)) V for one head; returns [Sq, d] in the input dtype."""
    d, Sq = qT.shape
    _, Skv = kT.shape
    out = nl.ndarray((Sq, d), dtype=qT.dtype, buffer=nl.shared_hbm)
    scale = 1.0 / float(d) ** 0.5
    VC = min(128, TK)  # P is transposed / multiplied in chunks of VC key rows
    NC = TK // VC
    LT = max(TK, LT or TK)
    QLOAD = QLOAD or 1
    # SEC: keys per flash section, used above SECTION_THRESHOLD keys (None: one section)
    sec = SEC if SEC and Skv > (SECTION_THRESHOLD or 0) else Skv
    n_sec = (Skv + sec - 1) // sec
    scratch = None
    if n_sec > 1:
        scratch = nl.ndarray((Sq, d), dtype=nl.float32, buffer=nl.shared_hbm)
    n_grp = Sq // TQ
    # P is transposed for P V by one SBUF->SBUF DMA transpose per key tile, as the library does, from
    # NeuronCore-v3 on (documented at up to half the copy rate [ARCH3]); on v2, whose DMA transposes
    # the docs call much slower [PERF], on the PE array (128 keys at a time) as NKI's flash kernels do
    dma_pt = nisa.get_nc_version() >= nisa.nc_version.gen3
    off = Skv - Sq  # causal: query r sits at key position r + off (queries end with the keys)
    ip, jf = nl.mgrid[0:TQ, 0:TK]
    st = {}  # per-group tiles that outlive a stage (running max / sum across sections)

    def last_row(g):
        return g * TQ + TQ - 1 + off if causal else Skv

    for s_i in range(n_sec):
        s0 = s_i * sec
        s1 = min(Skv, s0 + sec)
        nt = (s1 - s0) // TK
        k_sb = nl.ndarray((nt, nl.par_dim(d), TK), dtype=kT.dtype, buffer=nl.sbuf)
        v_sb = nl.ndarray((nt * NC, nl.par_dim(VC), d), dtype=v.dtype, buffer=nl.sbuf)
        for j in range(nt):
            k_sb[j] = nl.load(kT[:, s0 + j * TK:s0 + (j + 1) * TK])
        for c in range(nt * NC):
            v_sb[c] = nl.load(v[s0 + c * VC:s0 + (c + 1) * VC, :])
        groups = [g for g in range(n_grp) if _has(last_row(g), s0)]
        cur = {}

        def tiles(g):
            return [j for j in range(nt) if _has(last_row(g), s0 + j * TK)]

        def load_q(g):
            if g % QLOAD == 0 or g == groups[0]:
                g1 = min(n_grp, (g // QLOAD + 1) * QLOAD)
                blk = nl.ndarray((nl.par_dim(d), (g1 - g) * TQ), dtype=qT.dtype, buffer=nl.sbuf)
                blk[...] = nl.load(qT[:, g * TQ:g1 * TQ])
                for h in range(g, g1):
                    cur[("q", h)] = blk[:, (h - g) * TQ:(h - g + 1) * TQ]

        def qk(g, js):
            if ("pmax", g) not in cur:
                cur[("pmax", g)] = nl.ndarray((nl.par_dim(TQ), nt), dtype=nl.float32, buffer=nl.sbuf)
            pmax = cur[("pmax", g)]
            row0 = g * TQ + off
            for j in js:
                s = nisa.nc_matmul(cur[("q", g)], k_sb[j])
                k0 = s0 + j * TK
                if causal and k0 + TK - 1 > row0:
                    s = nisa.affine_select(pred=(row0 + ip >= k0 + jf), on_true_tile=nisa.tensor_copy(s),
                                           on_false_value=NEG, dtype=nl.float32)
                cur[("s", g, j)] = nisa.tensor_scalar_reduce(data=s, op0=nl.multiply, operand0=scale,
                                                             reduce_op=nl.max, reduce_res=pmax[:, j:j + 1],
                                                             dtype=nl.float32)

        def update_max(g):
            js = tiles(g)
            nmax = nisa.tensor_reduce(nl.max, cur[("pmax", g)][:, 0:len(js)], axis=(1,), keepdims=True,
                                      negate=True, dtype=nl.float32)
            if s_i == 0:
                st[("nm", g)] = nmax
            else:
                prev = st[("nm", g)]
                new = nl.minimum(prev, nmax)  # negated maxima: the smaller is the larger max
                # exp(m_prev - m_new) = exp(-(-m_prev) + (-m_new))
                cur[("corr", g)] = nisa.activation(nl.exp, prev, bias=new, scale=-1.0)
                st[("nm", g)] = new

        def exp(g):
            js = tiles(g)
            psum_ = nl.ndarray((nl.par_dim(TQ), nt), dtype=nl.float32, buffer=nl.sbuf)
            for jj, j in enumerate(js):
                e = nisa.activation_reduce(nl.exp, cur.pop(("s", g, j)), bias=st[("nm", g)],
                                           reduce_op=nl.add, reduce_res=psum_[:, jj:jj + 1], dtype=qT.dtype)
                if dma_pt:
                    pT = nisa.dma_transpose(e.reshape((TQ, NC, VC)), axes=(2, 1, 0))
                    cur[("pT", g, j)] = [pT[:, c, :] for c in range(NC)]
                else:
                    pT = nl.ndarray((NC, nl.par_dim(VC), TQ), dtype=qT.dtype, buffer=nl.sbuf)
                    for c in range(NC):
                        # PSUM -> SBUF evacuations alternate between Vector and Scalar
                        eng = nisa.scalar_engine if c % 2 else nisa.vector_engine
                        pT[c] = nisa.tensor_copy(nisa.nc_transpose(e[:, c * VC:(c + 1) * VC]),
                                                 dtype=qT.dtype, engine=eng)
                    cur[("pT", g, j)] = [pT[c] for c in range(NC)]
            cur[("sum", g)] = nisa.tensor_reduce(nl.add, psum_[:, 0:len(js)], axis=(1,), keepdims=True,
                                                 dtype=nl.float32)

        def pv(g, big):
            """P V of the key tiles of large tile ``big`` into the group's SBUF accumulator."""
            per = LT // TK
            js = [j for j in tiles(g) if big * per <= j < (big + 1) * per]
            if not js:
                return
            acc = nl.zeros((TQ, d), nl.float32, buffer=nl.psum)
            for j in js:
                pT = cur.pop(("pT", g, j))
                for c in range(NC):
                    if _has(last_row(g), s0 + j * TK + c * VC):
                        acc += nisa.nc_matmul(pT[c], v_sb[j * NC + c])
            if big == 0:
                cur[("o", g)] = nisa.tensor_copy(acc, dtype=nl.float32)
            else:
                cur[("o", g)] = nl.add(cur[("o", g)], acc, dtype=nl.float32)

        def write(g):
            o, ssum = cur.pop(("o", g)), cur.pop(("sum", g))
            rows = slice(g * TQ, (g + 1) * TQ)
            if s_i > 0:
                prev = nl.load(scratch[rows, :])
                corr = cur.pop(("corr", g))
                o = nisa.scalar_tensor_tensor(data=prev, op0=nl.multiply, operand0=corr, op1=nl.add,
                                              operand1=o)
                ssum = nisa.scalar_tensor_tensor(data=st[("l", g)], op0=nl.multiply, operand0=corr,
                                                 op1=nl.add, operand1=ssum)
            if s_i == n_sec - 1 or not _has(last_row(g), s1):
                r = nisa.reciprocal(ssum)
                nl.store(out[rows, :], value=nisa.activation(nl.copy, o, scale=r, dtype=qT.dtype))
            else:
                st[("l", g)] = ssum
                nl.store(scratch[rows, :], value=o)

        def front(g):
            load_q(g)
            qk(g, tiles(g))
            update_max(g)

        def fused(g, g2):
            """P V of group g interleaved, large tile by large tile, with QK^T of group g2."""
            per = LT // TK
            js2 = tiles(g2) if g2 is not None else []
            for big in range((nt + per - 1) // per):
                pv(g, big)
                if g2 is not None:
                    qk(g2, [j for j in js2 if big * per <= j < (big + 1) * per])

        n = len(groups)
        front(groups[0])
        if n == 1:
            exp(groups[0])
            fused(groups[0], None)
            write(groups[0])
            continue
        exp(groups[0])
        front(groups[1])
        for i in range(n - 2):
            g, g1, g2 = groups[i], groups[i + 1], groups[i + 2]
            load_q(g2)
            exp(g1)
            fused(g, g2)
            write(g)
            update_max(g2)
        fused(groups[n - 2], None)
        write(groups[n - 2])
        exp(groups[n - 1])
        fused(groups[n - 1], None)
        write(groups[n - 1])
    return out
