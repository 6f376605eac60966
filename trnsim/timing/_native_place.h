/* _native_place.h: placing one DMA or Vector/Scalar/GpSimd/Sync instruction (scheduler.py:
 * place_dma, place_compute) and the early issue of the `window` stream order (reorder.py,
 * scheduler.py: issue_early), for the list scheduler in _native_schedule.h.
 * Part of the _native extension: included once by _native.c, before _native_schedule.h. */

enum { KIND_COMPUTE = 0, KIND_TENSOR = 1, KIND_DMA = 2 };

/* What placing an instruction reads and updates: schedule_py's locals. */
typedef struct {
    /* per shape */
    const int32_t *sh, *sk;
    const uint8_t *skind, *sports;
    const double *socc, *slat, *sdur, *sfix, *shid;
    const int64_t *sdb, *shb;
    /* per engine alternative */
    const double *aocc, *alat, *ahid;
    const uint8_t *aports;
    /* per instruction: the outputs */
    double *start, *end, *busy;
    uint8_t *engs;
    /* compute engines and the v2 shared ports */
    double *freeat;
    double sbuf_port, psum_port;
    /* DMA queues (rules.DmaQueues): histories shared copy-on-write, parts as DmaParts stores them */
    Hist *hist;
    int32_t *hist_of, *grp, *ghist;
    Py_ssize_t nhist, window;
    int nq, qnext;
    size_t qsz;
    double *qbusy;
    uint8_t *qseen;
    PyObject *qorder;
    Out gi, gs, ge, goff, gq;
    int64_t hbm_total, dma_total;
} Sched;

/* DmaQueues.place: transfer i (shape s) ready at `ready` over the next k queues; -1 on error */
static int place_dma(Sched *c, Py_ssize_t i, int32_t s, double ready) {
    int nq = c->nq, qnext = c->qnext, k = c->sk[s];
    Hist *hist = c->hist;
    int32_t *hist_of = c->hist_of, *grp = c->grp, *ghist = c->ghist;
    double d = c->sdur[s], s0 = ready + c->sfix[s], fin = s0, first = 0.0, last_ps = 0.0,
           last_pe = 0.0;
    int have_first = 0, ng = 0;
    /* group this transfer's queues by shared history, in order of first appearance */
    for (int j = 0; j < k; j++) {
        int q = (qnext + j) % nq, gidx = 0;
        while (gidx < ng && ghist[gidx] != hist_of[q]) gidx++;
        if (gidx == ng) ghist[ng++] = hist_of[q];
        grp[j] = gidx;
    }
    for (int gidx = 0; gidx < ng; gidx++) {
        int32_t h = ghist[gidx];
        int size = 0;
        for (int j = 0; j < k; j++) size += grp[j] == gidx;
        if (size != hist[h].refs) { /* only some queues of this history take part: split */
            int32_t h2 = (int32_t)c->nhist++;
            Hist *src = &hist[h], *dst = &hist[h2];
            if (hist_reserve(dst, src->n > 0 ? src->n : 1) < 0) return -1;
            memcpy(dst->st, src->st, (size_t)src->n * sizeof(double));
            memcpy(dst->en, src->en, (size_t)src->n * sizeof(double));
            dst->n = src->n;
            dst->refs = size;
            src->refs -= size;
            for (int j = 0; j < k; j++)
                if (grp[j] == gidx) hist_of[(qnext + j) % nq] = h2;
            h = h2;
        }
        double ps, pe;
        if (hist_place(&hist[h], s0, d, c->window, &ps) < 0) return -1;
        pe = ps + d;
        int32_t ii = (int32_t)i;
        /* a group placed exactly like the previous one of this transfer is stored as its
           continuation (same parts in the same order; keeps split histories compact) */
        int cont = gidx > 0 && ps == last_ps && pe == last_pe;
        if (cont) c->goff.n -= 8;
        else if (out_put(&c->gi, &ii, 4) < 0 || out_put(&c->gs, &ps, 8) < 0 ||
                 out_put(&c->ge, &pe, 8) < 0)
            return -1;
        last_ps = ps;
        last_pe = pe;
        for (int j = 0; j < k; j++) {
            if (grp[j] != gidx) continue;
            int q = (qnext + j) % nq;
            uint16_t q16 = (uint16_t)q;
            uint8_t q8 = (uint8_t)q;
            if (out_put(&c->gq, c->qsz == 1 ? (void *)&q8 : (void *)&q16, (Py_ssize_t)c->qsz) < 0)
                return -1;
            c->qbusy[q] += pe - ps;
            if (!c->qseen[q]) {
                c->qseen[q] = 1;
                PyObject *qo = PyLong_FromLong(q);
                if (!qo || PyList_Append(c->qorder, qo) < 0) {
                    Py_XDECREF(qo);
                    return -1;
                }
                Py_DECREF(qo);
            }
        }
        int64_t nparts = (int64_t)(c->gq.n / (Py_ssize_t)c->qsz);
        if (out_put(&c->goff, &nparts, 8) < 0) return -1;
        if (!have_first || ps < first) {
            first = ps;
            have_first = 1;
        }
        if (pe > fin) fin = pe;
    }
    c->qnext = (qnext + k) % nq;
    c->start[i] = have_first ? first : s0;
    c->end[i] = fin;
    c->busy[i] = fin;
    c->hbm_total += c->shb[s];
    c->dma_total += c->sdb[s];
    return 0;
}

/* place_compute: instruction i (shape s) on engine e, with its cost on alternative `alt` (-1: its
   traced engine's), inputs ready at `ready`; holds the shared ports it touches */
static void place_compute(Sched *c, Py_ssize_t i, int32_t s, uint8_t e, Py_ssize_t alt,
                          double ready) {
    double o0 = c->socc[s], h0 = c->shid[s], la = c->slat[s];
    uint8_t pf = c->sports[s];
    if (alt >= 0) {
        o0 = c->aocc[alt];
        h0 = c->ahid[alt];
        la = c->alat[alt];
        pf = c->aports[alt];
    }
    double *freeat = c->freeat;
    double st = freeat[e] > ready ? freeat[e] : ready;
    double o = overlap_occ(o0, h0, freeat[e], ready);
    if ((pf & PORT_SBUF) && c->sbuf_port > st) st = c->sbuf_port;
    if ((pf & PORT_PSUM) && c->psum_port > st) st = c->psum_port;
    if (pf & PORT_SBUF) c->sbuf_port = st + o;
    if (pf & PORT_PSUM) c->psum_port = st + o;
    c->start[i] = st;
    c->busy[i] = st + o;
    c->end[i] = st + o + la;
    freeat[e] = st + o;
}

/* reorder.Lookahead: per reordered engine its stream (the instructions traced on it, in program
   order: sidx[soff[e] .. soff[e + 1])), the first unplaced position, and which are placed. */
typedef struct {
    Py_ssize_t window;
    int32_t *sidx;
    Py_ssize_t soff[257], head[256];
    uint8_t *placed;
    const int64_t *aoff;
    const int64_t *dptr;
    const int32_t *dind;
    const uint8_t *seng; /* per shape: the traced engine (a load's is the DMA engine) */
    double sync_ns;
} Look;

/* Lookahead.hoists: 1 when every input of j is produced by an instruction already placed or by a
   DMA load whose own inputs are (i: the instruction program order has reached) */
static int look_ready_inputs(const Look *L, const Sched *c, Py_ssize_t j, Py_ssize_t i) {
    for (int64_t k = L->dptr[j]; k < L->dptr[j + 1]; k++) {
        int32_t p = L->dind[k];
        if (p < i || L->placed[p]) continue;
        if (c->skind[c->sh[p]] != KIND_DMA) return 0;
        for (int64_t kk = L->dptr[p]; kk < L->dptr[p + 1]; kk++) {
            int32_t q = L->dind[kk];
            if (q >= i && !L->placed[q]) return 0;
        }
    }
    return 1;
}

/* Lookahead.overtakes: 1 when hoisting j's loads (its unplaced inputs from i on) now would put them
   on the DMA queues ahead of an older unplaced transfer (from i on) whose own inputs are produced */
static int look_overtakes(const Look *L, const Sched *c, Py_ssize_t j, Py_ssize_t i) {
    int32_t last = -1;
    for (int64_t k = L->dptr[j]; k < L->dptr[j + 1]; k++) {
        int32_t p = L->dind[k];
        if (p >= i && !L->placed[p] && p > last) last = p;
    }
    for (Py_ssize_t d = i; d < last; d++) {
        if (L->placed[d] || c->skind[c->sh[d]] != KIND_DMA) continue;
        int mine = 0, ready = 1;
        for (int64_t k = L->dptr[j]; k < L->dptr[j + 1] && !mine; k++) mine = L->dind[k] == d;
        if (mine) continue;
        for (int64_t k = L->dptr[d]; k < L->dptr[d + 1] && ready; k++) {
            int32_t q = L->dind[k];
            ready = q < i || L->placed[q];
        }
        if (ready) return 1;
    }
    return 0;
}

/* Place the loads issued early for j (its unplaced inputs from i on); -1 on error */
static int hoist_loads(Sched *c, Look *L, Py_ssize_t j, Py_ssize_t i) {
    for (int64_t k = L->dptr[j]; k < L->dptr[j + 1]; k++) {
        int32_t p = L->dind[k];
        if (p < i || L->placed[p]) continue;
        uint8_t pe = L->seng[c->sh[p]];
        c->engs[p] = pe;
        double rp = ready_for(L->dptr, L->dind, c->end, c->engs, p, pe, L->sync_ns);
        if (place_dma(c, p, c->sh[p], rp) < 0) return -1;
        L->placed[p] = 1;
    }
    return 0;
}

/* scheduler.dma_ahead: before transfer i (inputs ready at ready_i) goes to the queues, place the
   later transfers of the DMA stream e (within the window) whose inputs are produced sooner; -1 on
   error */
static int dma_ahead(Sched *c, Look *L, Py_ssize_t i, uint8_t e, double ready_i) {
    const int32_t *sidx = L->sidx + L->soff[e];
    Py_ssize_t len = L->soff[e + 1] - L->soff[e];
    uint8_t *placed = L->placed;
    Py_ssize_t h = L->head[e];
    while (h < len && placed[sidx[h]]) h++;
    L->head[e] = h;
    if (h < len && sidx[h] == i) h++;
    Py_ssize_t hi = len - h < L->window - 1 ? len : h + L->window - 1;
    for (Py_ssize_t q = h; q < hi; q++) {
        int32_t j = sidx[q];
        if (placed[j]) continue;
        int ok = 1;
        for (int64_t k = L->dptr[j]; k < L->dptr[j + 1] && ok; k++) {
            int32_t p = L->dind[k];
            ok = p < i || placed[p];
        }
        if (!ok) continue;
        double r = ready_for(L->dptr, L->dind, c->end, c->engs, j, e, L->sync_ns);
        if (r < ready_i) {
            c->engs[j] = e;
            if (place_dma(c, j, c->sh[j], r) < 0) return -1;
            placed[j] = 1;
        }
    }
    return 0;
}

/* scheduler.issue_early: while engine e would idle before i (inputs ready at ready_i), issue the
   candidate of its stream that starts first (one whose loads would overtake an older ready
   transfer only when no other can); -1 on error */
static int issue_early(Sched *c, Look *L, Py_ssize_t i, uint8_t e, double ready_i) {
    const int32_t *sidx = L->sidx + L->soff[e];
    Py_ssize_t len = L->soff[e + 1] - L->soff[e];
    uint8_t *placed = L->placed;
    while (c->freeat[e] < ready_i) {
        double f = c->freeat[e], best_s = 0.0, best_r = 0.0;
        Py_ssize_t h = L->head[e], best = -1, deferred = -1;
        while (h < len && placed[sidx[h]]) h++;
        L->head[e] = h;
        if (h < len && sidx[h] == i) h++;
        Py_ssize_t hi = len - h < L->window - 1 ? len : h + L->window - 1;
        for (Py_ssize_t q = h; q < hi; q++) {
            int32_t j = sidx[q], s = c->sh[j];
            if (placed[j]) continue;
            if (c->skind[s] == KIND_COMPUTE && L->aoff[s + 1] - L->aoff[s] > 1) continue;
            if (!look_ready_inputs(L, c, j, i)) continue;
            if (look_overtakes(L, c, j, i)) {
                if (deferred < 0) deferred = j;
                continue;
            }
            if (hoist_loads(c, L, j, i) < 0) return -1;
            double r = ready_for(L->dptr, L->dind, c->end, c->engs, j, e, L->sync_ns);
            double sj = r > f ? r : f;
            if (sj < ready_i && (best < 0 || sj < best_s)) {
                best = j;
                best_s = sj;
                best_r = r;
            }
        }
        if (best < 0 && deferred >= 0) {
            if (hoist_loads(c, L, deferred, i) < 0) return -1;
            double r = ready_for(L->dptr, L->dind, c->end, c->engs, deferred, e, L->sync_ns);
            if ((r > f ? r : f) < ready_i) {
                best = deferred;
                best_r = r;
            }
        }
        if (best < 0) return 0;
        c->engs[best] = e;
        place_compute(c, best, c->sh[best], e, -1, best_r);
        placed[best] = 1;
    }
    return 0;
}
