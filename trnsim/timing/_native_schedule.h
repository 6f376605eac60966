/* _native_schedule.h: the list scheduler (scheduler.py, rules.py, des/).
 * Part of the _native extension: included once by _native.c (one translation unit, so the
 * static helpers stay private and the build needs no extra sources). */
/* ---------------------------------------------------------------------------------------------
 * schedule (scheduler.py)
 * ------------------------------------------------------------------------------------------- */

/* Busy intervals of one DMA queue, merged (des/gaps.py: GapResource; rules.py: DmaQueues). */
typedef struct {
    double *st, *en;
    Py_ssize_t n, cap;
    int32_t refs; /* queues whose history this is (copy-on-write sharing) */
} Hist;

static int hist_reserve(Hist *h, Py_ssize_t need) {
    if (need <= h->cap) return 0;
    Py_ssize_t c = h->cap ? h->cap : 16;
    while (c < need) c *= 2;
    double *a = (double *)realloc(h->st, (size_t)c * sizeof(double));
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    h->st = a;
    double *b = (double *)realloc(h->en, (size_t)c * sizeof(double));
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    h->en = b;
    h->cap = c;
    return 0;
}

/* bisect.bisect_right, step for step (so the result is the same even on unsorted input) */
static inline Py_ssize_t bisect_right(const double *a, Py_ssize_t n, double x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = ((size_t)lo + hi) / 2;
        if (x < a[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* GapResource.place: the start of a transfer of `dur` ready at `ready`; -1 on error. */
static int hist_place(Hist *h, double ready, double dur, Py_ssize_t window, double *out) {
    double *st = h->st, *en = h->en;
    Py_ssize_t n = h->n;
    if (n == 0 || ready >= en[n - 1]) {
        double s = ready;
        if (n && s == en[n - 1]) en[n - 1] = s + dur;
        else {
            if (hist_reserve(h, n + 1) < 0) return -1;
            h->st[n] = s;
            h->en[n] = s + dur;
            h->n = n + 1;
        }
        *out = s;
        return 0;
    }
    Py_ssize_t j = bisect_right(en, n, ready);
    if (j < n - window) {
        j = n - window;
        if (en[j - 1] > ready) ready = en[j - 1];
    }
    double s = ready;
    while (j < n) {
        if (s + dur <= st[j]) break;
        if (en[j] > s) s = en[j];
        j++;
    }
    double e = s + dur;
    *out = s;
    if (j == n) {
        if (s == en[n - 1]) en[n - 1] = e;
        else {
            if (hist_reserve(h, n + 1) < 0) return -1;
            h->st[n] = s;
            h->en[n] = e;
            h->n = n + 1;
        }
        return 0;
    }
    /* insert [s, e) before interval j, merging with neighbours */
    if (j > 0 && en[j - 1] == s) {
        en[j - 1] = e;
        if (e == st[j]) {
            en[j - 1] = en[j];
            memmove(st + j, st + j + 1, (size_t)(n - j - 1) * sizeof(double));
            memmove(en + j, en + j + 1, (size_t)(n - j - 1) * sizeof(double));
            h->n = n - 1;
        }
    } else if (e == st[j]) {
        st[j] = s;
    } else {
        if (hist_reserve(h, n + 1) < 0) return -1;
        st = h->st;
        en = h->en;
        memmove(st + j + 1, st + j, (size_t)(n - j) * sizeof(double));
        memmove(en + j + 1, en + j, (size_t)(n - j) * sizeof(double));
        st[j] = s;
        en[j] = e;
        h->n = n + 1;
    }
    return 0;
}

/* dI/dt cap of the Tensor engine (rules.py: TensorThrottle); busy intervals in a ring buffer. */
typedef struct {
    double cap0, ramp, window, min_util;
    int enabled, has_ramp;
    double ramp_start, busy_sum;
    double *bs, *be;
    Py_ssize_t head, count, cap;
} Throttle;

static double throttle_factor(Throttle *th, double t) {
    if (!th->enabled) return 1.0;
    double lo = t - th->window;
    while (th->count && th->be[th->head] <= lo) {
        th->busy_sum -= th->be[th->head] - th->bs[th->head];
        th->head = (th->head + 1) % th->cap;
        th->count--;
    }
    double busy = th->busy_sum;
    if (th->count && th->bs[th->head] < lo) busy -= lo - th->bs[th->head];
    if (!th->has_ramp ||
        (busy < th->min_util * th->window && t - th->ramp_start >= th->window)) {
        th->ramp_start = t;
        th->has_ramp = 1;
    }
    double x = (t - th->ramp_start) / th->ramp;
    return th->cap0 + (1.0 - th->cap0) * (x < 1.0 ? x : 1.0);
}

static int throttle_record(Throttle *th, double s, double e) {
    if (!th->enabled) return 0;
    if (th->count == th->cap) { /* grow the ring, unrolled to start at index 0 */
        Py_ssize_t c = th->cap ? th->cap * 2 : 64;
        double *bs = (double *)malloc((size_t)c * sizeof(double));
        double *be = (double *)malloc((size_t)c * sizeof(double));
        if (!bs || !be) {
            free(bs);
            free(be);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t k = 0; k < th->count; k++) {
            bs[k] = th->bs[(th->head + k) % th->cap];
            be[k] = th->be[(th->head + k) % th->cap];
        }
        free(th->bs);
        free(th->be);
        th->bs = bs;
        th->be = be;
        th->head = 0;
        th->cap = c;
    }
    Py_ssize_t k = (th->head + th->count) % th->cap;
    th->bs[k] = s;
    th->be[k] = e;
    th->count++;
    th->busy_sum += e - s;
    return 0;
}

enum { KIND_COMPUTE = 0, KIND_TENSOR = 1, KIND_DMA = 2 };

static PyObject *py_schedule(PyObject *self, PyObject *args) {
    Py_ssize_t n, window;
    int n_eng, nq;
    double sync_ns, th_start, th_ramp, th_window, th_min, margin;
    PyObject *o_shape, *o_kind, *o_eng, *o_nreads, *o_nregs, *o_occ, *o_occs, *o_lat, *o_flops,
        *o_bf16, *o_dbytes, *o_hbytes, *o_k, *o_dur, *o_fixed, *o_ports, *o_geo, *o_ptr, *o_idx,
        *o_start, *o_end, *o_busy, *o_engout, *o_hid, *o_aoff, *o_aeng, *o_aocc, *o_alat, *o_ahid,
        *o_aports;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOOOOOOOOOOOOOOOOiidddddnOOOOOOOd", &n, &o_shape, &o_kind,
                          &o_eng, &o_nreads, &o_nregs, &o_occ, &o_occs, &o_lat, &o_flops, &o_bf16,
                          &o_dbytes, &o_hbytes, &o_k, &o_dur, &o_fixed, &o_ports, &o_geo, &o_ptr,
                          &o_idx, &o_start, &o_end, &o_busy, &o_engout, &n_eng, &nq, &sync_ns,
                          &th_start, &th_ramp, &th_window, &th_min, &window, &o_hid, &o_aoff,
                          &o_aeng, &o_aocc, &o_alat, &o_ahid, &o_aports, &margin))
        return NULL;
    if (n < 0 || n > INT32_MAX || nq < 1 || nq > 65535 || n_eng < 1 || n_eng > 255 || window < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "instruction count, queue count, engine count or gap window out of range");
        return NULL;
    }
    Buf shape = {0}, kind = {0}, eng = {0}, nreads = {0}, nregs = {0}, occ = {0}, occs = {0},
        lat = {0}, flops = {0}, bf16 = {0}, dbytes = {0}, hbytes = {0}, kq = {0}, dur = {0},
        fixed = {0}, ports = {0}, geo = {0}, ptr = {0}, idx = {0}, o_s = {0}, o_e = {0},
        o_b = {0}, o_en = {0}, hidb = {0}, aoffb = {0}, aengb = {0}, aoccb = {0}, alatb = {0},
        ahidb = {0}, aportsb = {0};
    Out gi = {0}, gs = {0}, ge = {0}, goff = {0}, gq = {0};
    Hist *hist = NULL;
    int32_t *hist_of = NULL, *grp = NULL, *ghist = NULL;
    double *qbusy = NULL, *freeat = NULL;
    uint8_t *qseen = NULL;
    PyObject *qorder = NULL, *result = NULL;
    Throttle th;
    memset(&th, 0, sizeof th);
    Py_ssize_t nhist = 0;

    if (buf_get(o_shape, &shape, 4, n, 0, "shape") < 0 || buf_get(o_kind, &kind, 1, -1, 0, "kind") < 0)
        goto done;
    Py_ssize_t S = BUF_N(kind, uint8_t);
    if (buf_get(o_eng, &eng, 1, S, 0, "engine") < 0 || buf_get(o_nreads, &nreads, 4, S, 0, "nreads") < 0 ||
        buf_get(o_nregs, &nregs, 4, S, 0, "nregs") < 0 || buf_get(o_occ, &occ, 8, S, 0, "occ") < 0 ||
        buf_get(o_occs, &occs, 8, S, 0, "occ_same") < 0 || buf_get(o_lat, &lat, 8, S, 0, "lat") < 0 ||
        buf_get(o_flops, &flops, 8, S, 0, "flops") < 0 || buf_get(o_bf16, &bf16, 8, S, 0, "bf16eq") < 0 ||
        buf_get(o_dbytes, &dbytes, 8, S, 0, "dma_bytes") < 0 ||
        buf_get(o_hbytes, &hbytes, 8, S, 0, "hbm_bytes") < 0 ||
        buf_get(o_k, &kq, 4, S, 0, "dma_engines") < 0 || buf_get(o_dur, &dur, 8, S, 0, "dur") < 0 ||
        buf_get(o_fixed, &fixed, 8, S, 0, "fixed") < 0 || buf_get(o_ports, &ports, 1, S, 0, "ports") < 0 ||
        buf_get(o_geo, &geo, 8, -1, 0, "region geometry") < 0 ||
        buf_get(o_ptr, &ptr, 8, n + 1, 0, "indptr") < 0 || buf_get(o_idx, &idx, 4, -1, 0, "indices") < 0 ||
        buf_get(o_start, &o_s, 8, n, 1, "start") < 0 || buf_get(o_end, &o_e, 8, n, 1, "end") < 0 ||
        buf_get(o_busy, &o_b, 8, n, 1, "busy_end") < 0 || buf_get(o_engout, &o_en, 1, n, 1, "engine out") < 0 ||
        buf_get(o_hid, &hidb, 8, S, 0, "hidden") < 0 || buf_get(o_aoff, &aoffb, 8, S + 1, 0, "alt offsets") < 0 ||
        buf_get(o_aeng, &aengb, 1, -1, 0, "alt engines") < 0)
        goto done;
    Py_ssize_t A = BUF_N(aengb, uint8_t);
    if (buf_get(o_aocc, &aoccb, 8, A, 0, "alt occ") < 0 || buf_get(o_alat, &alatb, 8, A, 0, "alt lat") < 0 ||
        buf_get(o_ahid, &ahidb, 8, A, 0, "alt hidden") < 0 || buf_get(o_aports, &aportsb, 1, A, 0, "alt ports") < 0)
        goto done;
    const int64_t *aoff = BUF_P(aoffb, int64_t);
    const uint8_t *aeng = BUF_P(aengb, uint8_t), *aports = BUF_P(aportsb, uint8_t);
    const double *shid = BUF_P(hidb, double), *aocc = BUF_P(aoccb, double),
                 *alat = BUF_P(alatb, double), *ahid = BUF_P(ahidb, double);
    const int32_t *sh = BUF_P(shape, int32_t), *snrd = BUF_P(nreads, int32_t),
                  *snr = BUF_P(nregs, int32_t), *sk = BUF_P(kq, int32_t),
                  *dind = BUF_P(idx, int32_t);
    const uint8_t *skind = BUF_P(kind, uint8_t), *seng = BUF_P(eng, uint8_t),
                  *sports = BUF_P(ports, uint8_t);
    const double *socc = BUF_P(occ, double), *soccs = BUF_P(occs, double),
                 *slat = BUF_P(lat, double), *sfl = BUF_P(flops, double),
                 *sbf = BUF_P(bf16, double), *sdur = BUF_P(dur, double),
                 *sfix = BUF_P(fixed, double);
    const int64_t *sdb = BUF_P(dbytes, int64_t), *shb = BUF_P(hbytes, int64_t),
                  *g = BUF_P(geo, int64_t), *dptr = BUF_P(ptr, int64_t);
    double *start = BUF_P(o_s, double), *end = BUF_P(o_e, double), *busy = BUF_P(o_b, double);
    uint8_t *engs = BUF_P(o_en, uint8_t);
    Py_ssize_t R = BUF_N(geo, int64_t) / 5, ndeps = BUF_N(idx, int32_t);
    size_t qsz = nq <= 256 ? 1 : 2;

    if (dptr[0] != 0 || dptr[n] > ndeps) {
        PyErr_SetString(PyExc_ValueError, "dependency indptr does not match its indices");
        goto done;
    }
    for (Py_ssize_t s = 0; s < S; s++) {
        if (seng[s] >= n_eng || skind[s] > KIND_DMA ||
            (skind[s] == KIND_DMA && (sk[s] < 1 || sk[s] > nq))) {
            PyErr_SetString(PyExc_ValueError, "shape with an unknown engine or a bad queue count");
            goto done;
        }
        if (aoff[s] < 0 || aoff[s] > aoff[s + 1] || aoff[s + 1] > A) {
            PyErr_SetString(PyExc_ValueError, "engine alternatives out of range");
            goto done;
        }
    }
    for (Py_ssize_t a = 0; a < A; a++)
        if (aeng[a] >= n_eng) {
            PyErr_SetString(PyExc_ValueError, "engine alternative with an unknown engine");
            goto done;
        }
    /* engines of instructions not scheduled yet compare unequal to every engine, as the
       reference's "" placeholder does */
    memset(engs, 255, (size_t)n);
    hist = (Hist *)calloc((size_t)nq, sizeof(Hist));
    hist_of = (int32_t *)calloc((size_t)nq, sizeof(int32_t));
    grp = (int32_t *)malloc((size_t)nq * sizeof(int32_t));
    ghist = (int32_t *)malloc((size_t)nq * sizeof(int32_t));
    qbusy = (double *)calloc((size_t)nq, sizeof(double));
    qseen = (uint8_t *)calloc((size_t)nq, 1);
    freeat = (double *)calloc((size_t)n_eng, sizeof(double));
    qorder = PyList_New(0);
    if (!hist || !hist_of || !grp || !ghist || !qbusy || !qseen || !freeat) {
        PyErr_NoMemory();
        goto done;
    }
    if (!qorder || out_init(&gi, 1 << 12) < 0 || out_init(&gs, 1 << 13) < 0 ||
        out_init(&ge, 1 << 13) < 0 || out_init(&goff, 1 << 13) < 0 || out_init(&gq, 1 << 12) < 0)
        goto done;
    nhist = 1; /* every queue starts with one shared, empty history */
    hist[0].refs = nq;
    th.cap0 = th_start;
    th.ramp = th_ramp;
    th.window = th_window;
    th.min_util = th_min;
    th.enabled = th_start < 1.0;

    int64_t zero = 0, hbm_total = 0, dma_total = 0;
    if (out_put(&goff, &zero, 8) < 0) goto done;
    double flops_total = 0.0, bf16_total = 0.0, throttled = 0.0;
    double sbuf_port = 0.0, psum_port = 0.0;
    int has_stat = 0;
    int64_t stat[4] = {0, 0, 0, 0};
    int qnext = 0;
    Py_ssize_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t s = sh[i];
        if (s < 0 || s >= S) {
            PyErr_SetString(PyExc_IndexError, "shape id out of range");
            goto done;
        }
        if (off + snr[s] > R) {
            PyErr_SetString(PyExc_ValueError, "region arrays shorter than the shapes need");
            goto done;
        }
        uint8_t e = seng[s];
        Py_ssize_t alt = -1;
        if (skind[s] == KIND_COMPUTE && aoff[s + 1] - aoff[s] > 1) { /* left to the compiler */
            for (int64_t k = dptr[i]; k < dptr[i + 1]; k++)
                if (dind[k] < 0 || dind[k] >= n) {
                    PyErr_SetString(PyExc_IndexError, "dependency index out of range");
                    goto done;
                }
            alt = pick_engine(aoff[s], aoff[s + 1], aeng, aocc, ahid, aports, dptr, dind, end, engs,
                              i, sync_ns, freeat, sbuf_port, psum_port, margin);
            e = aeng[alt];
        }
        engs[i] = e;
        double ready = 0.0;
        for (int64_t k = dptr[i]; k < dptr[i + 1]; k++) {
            int32_t p = dind[k];
            if (p < 0 || p >= n) {
                PyErr_SetString(PyExc_IndexError, "dependency index out of range");
                goto done;
            }
            double r = end[p];
            if (sync_ns != 0.0 && engs[p] != e) r += sync_ns;
            if (r > ready) ready = r;
        }
        if (skind[s] == KIND_DMA) {
            int k = sk[s];
            double d = sdur[s], s0 = ready + sfix[s], fin = s0, first = 0.0, last_ps = 0.0,
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
                    int32_t h2 = (int32_t)nhist++;
                    Hist *src = &hist[h], *dst = &hist[h2];
                    if (hist_reserve(dst, src->n > 0 ? src->n : 1) < 0) goto done;
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
                if (hist_place(&hist[h], s0, d, window, &ps) < 0) goto done;
                pe = ps + d;
                int32_t ii = (int32_t)i;
                /* a group placed exactly like the previous one of this transfer is stored as its
                   continuation (same parts in the same order; keeps split histories compact) */
                int cont = gidx > 0 && ps == last_ps && pe == last_pe;
                if (cont) goff.n -= 8;
                else if (out_put(&gi, &ii, 4) < 0 || out_put(&gs, &ps, 8) < 0 ||
                         out_put(&ge, &pe, 8) < 0)
                    goto done;
                last_ps = ps;
                last_pe = pe;
                for (int j = 0; j < k; j++) {
                    if (grp[j] != gidx) continue;
                    int q = (qnext + j) % nq;
                    uint16_t q16 = (uint16_t)q;
                    uint8_t q8 = (uint8_t)q;
                    if (out_put(&gq, qsz == 1 ? (void *)&q8 : (void *)&q16, (Py_ssize_t)qsz) < 0)
                        goto done;
                    qbusy[q] += pe - ps;
                    if (!qseen[q]) {
                        qseen[q] = 1;
                        PyObject *qo = PyLong_FromLong(q);
                        if (!qo || PyList_Append(qorder, qo) < 0) {
                            Py_XDECREF(qo);
                            goto done;
                        }
                        Py_DECREF(qo);
                    }
                }
                int64_t nparts = (int64_t)(gq.n / (Py_ssize_t)qsz);
                if (out_put(&goff, &nparts, 8) < 0) goto done;
                if (!have_first || ps < first) {
                    first = ps;
                    have_first = 1;
                }
                if (pe > fin) fin = pe;
            }
            qnext = (qnext + k) % nq;
            start[i] = have_first ? first : s0;
            end[i] = fin;
            busy[i] = fin;
            hbm_total += shb[s];
            dma_total += sdb[s];
            off += snr[s];
            continue;
        }
        double st, o, la = slat[s];
        if (skind[s] == KIND_TENSOR) {
            /* the stationary operand is the first read; loading a new one costs more */
            int has = snrd[s] > 0, changed;
            const int64_t *r = g + 5 * off;
            if (has)
                changed = !has_stat || r[0] != stat[0] || r[1] != stat[1] || r[3] != stat[2] ||
                          r[4] != stat[3];
            else
                changed = has_stat;
            if (has) {
                stat[0] = r[0];
                stat[1] = r[1];
                stat[2] = r[3];
                stat[3] = r[4];
            }
            has_stat = has;
            double o0 = changed ? socc[s] : soccs[s];
            st = freeat[e] > ready ? freeat[e] : ready;
            double f = throttle_factor(&th, st);
            o = o0 / f;
            if (f < 1.0) throttled += o - o0;
            if (throttle_record(&th, st, st + o) < 0) goto done;
            flops_total += sfl[s];
            bf16_total += sbf[s];
        } else {
            double o0 = socc[s], h0 = shid[s];
            uint8_t pf = sports[s];
            if (alt >= 0) {
                o0 = aocc[alt];
                h0 = ahid[alt];
                la = alat[alt];
                pf = aports[alt];
            }
            st = freeat[e] > ready ? freeat[e] : ready;
            o = overlap_occ(o0, h0, freeat[e], ready);
            if ((pf & PORT_SBUF) && sbuf_port > st) st = sbuf_port;
            if ((pf & PORT_PSUM) && psum_port > st) st = psum_port;
            if (pf & PORT_SBUF) sbuf_port = st + o;
            if (pf & PORT_PSUM) psum_port = st + o;
        }
        start[i] = st;
        busy[i] = st + o;
        end[i] = st + o + la;
        freeat[e] = st + o;
        off += snr[s];
    }
    {
        PyObject *a = out_finish(&gi), *b = out_finish(&gs), *c = out_finish(&ge),
                 *d = out_finish(&goff), *q = out_finish(&gq);
        PyObject *qb = PyByteArray_FromStringAndSize((const char *)qbusy,
                                                     (Py_ssize_t)nq * (Py_ssize_t)sizeof(double));
        if (a && b && c && d && q && qb)
            result = Py_BuildValue("ddLLdNNNNNNO", flops_total, bf16_total, (long long)hbm_total,
                                   (long long)dma_total, throttled, a, b, c, d, q, qb, qorder);
        else {
            Py_XDECREF(a);
            Py_XDECREF(b);
            Py_XDECREF(c);
            Py_XDECREF(d);
            Py_XDECREF(q);
            Py_XDECREF(qb);
        }
    }
done:
    buf_release(&shape);
    buf_release(&kind);
    buf_release(&eng);
    buf_release(&nreads);
    buf_release(&nregs);
    buf_release(&occ);
    buf_release(&occs);
    buf_release(&lat);
    buf_release(&flops);
    buf_release(&bf16);
    buf_release(&dbytes);
    buf_release(&hbytes);
    buf_release(&kq);
    buf_release(&dur);
    buf_release(&fixed);
    buf_release(&ports);
    buf_release(&geo);
    buf_release(&ptr);
    buf_release(&idx);
    buf_release(&o_s);
    buf_release(&o_e);
    buf_release(&o_b);
    buf_release(&o_en);
    buf_release(&hidb);
    buf_release(&aoffb);
    buf_release(&aengb);
    buf_release(&aoccb);
    buf_release(&alatb);
    buf_release(&ahidb);
    buf_release(&aportsb);
    out_free(&gi);
    out_free(&gs);
    out_free(&ge);
    out_free(&goff);
    out_free(&gq);
    if (hist)
        for (Py_ssize_t k = 0; k < nhist; k++) {
            free(hist[k].st);
            free(hist[k].en);
        }
    free(hist);
    free(hist_of);
    free(grp);
    free(ghist);
    free(qbusy);
    free(qseen);
    free(freeat);
    free(th.bs);
    free(th.be);
    Py_XDECREF(qorder);
    return result;
}
