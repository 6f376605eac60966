/* _native_schedule.h: the list scheduler (scheduler.py, rules.py, des/).
 * Part of the _native extension: included once by _native.c (one translation unit, so the
 * static helpers stay private and the build needs no extra sources). */
/* ---------------------------------------------------------------------------------------------
 * schedule (scheduler.py)
 * ------------------------------------------------------------------------------------------- */

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

static PyObject *py_schedule(PyObject *self, PyObject *args) {
    Py_ssize_t n, window, rwin;
    int n_eng, nq, in_order;
    double sync_ns, th_start, th_ramp, th_window, th_min, margin;
    PyObject *o_shape, *o_kind, *o_eng, *o_nreads, *o_nregs, *o_occ, *o_occs, *o_lat, *o_flops,
        *o_bf16, *o_dbytes, *o_hbytes, *o_k, *o_dur, *o_fixed, *o_ports, *o_geo, *o_ptr, *o_idx,
        *o_start, *o_end, *o_busy, *o_engout, *o_hid, *o_aoff, *o_aeng, *o_aocc, *o_alat, *o_ahid,
        *o_aports, *o_reord;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOOOOOOOOOOOOOOOOiidddddnOOOOOOOdOni", &n, &o_shape, &o_kind,
                          &o_eng, &o_nreads, &o_nregs, &o_occ, &o_occs, &o_lat, &o_flops, &o_bf16,
                          &o_dbytes, &o_hbytes, &o_k, &o_dur, &o_fixed, &o_ports, &o_geo, &o_ptr,
                          &o_idx, &o_start, &o_end, &o_busy, &o_engout, &n_eng, &nq, &sync_ns,
                          &th_start, &th_ramp, &th_window, &th_min, &window, &o_hid, &o_aoff,
                          &o_aeng, &o_aocc, &o_alat, &o_ahid, &o_aports, &margin, &o_reord, &rwin,
                          &in_order))
        return NULL;
    in_order_engine = in_order;
    if (n < 0 || n > INT32_MAX || nq < 1 || nq > 65535 || n_eng < 1 || n_eng > 255 || window < 1 ||
        rwin < 1) {
        PyErr_SetString(PyExc_ValueError, "instruction count, queue count, engine count, gap "
                                          "window or reorder window out of range");
        return NULL;
    }
    Buf shape = {0}, kind = {0}, eng = {0}, nreads = {0}, nregs = {0}, occ = {0}, occs = {0},
        lat = {0}, flops = {0}, bf16 = {0}, dbytes = {0}, hbytes = {0}, kq = {0}, dur = {0},
        fixed = {0}, ports = {0}, geo = {0}, ptr = {0}, idx = {0}, o_s = {0}, o_e = {0},
        o_b = {0}, o_en = {0}, hidb = {0}, aoffb = {0}, aengb = {0}, aoccb = {0}, alatb = {0},
        ahidb = {0}, aportsb = {0}, reordb = {0};
    Sched c;
    memset(&c, 0, sizeof c);
    Look L;
    memset(&L, 0, sizeof L);
    int look = 0;
    PyObject *result = NULL;
    Throttle th;
    memset(&th, 0, sizeof th);

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
        buf_get(o_aeng, &aengb, 1, -1, 0, "alt engines") < 0 ||
        buf_get(o_reord, &reordb, 1, n_eng, 0, "reorder engines") < 0)
        goto done;
    Py_ssize_t A = BUF_N(aengb, uint8_t);
    if (buf_get(o_aocc, &aoccb, 8, A, 0, "alt occ") < 0 || buf_get(o_alat, &alatb, 8, A, 0, "alt lat") < 0 ||
        buf_get(o_ahid, &ahidb, 8, A, 0, "alt hidden") < 0 || buf_get(o_aports, &aportsb, 1, A, 0, "alt ports") < 0)
        goto done;
    const int64_t *aoff = BUF_P(aoffb, int64_t);
    const uint8_t *aeng = BUF_P(aengb, uint8_t), *reord = BUF_P(reordb, uint8_t);
    const int32_t *sh = BUF_P(shape, int32_t), *snrd = BUF_P(nreads, int32_t),
                  *snr = BUF_P(nregs, int32_t), *sk = BUF_P(kq, int32_t),
                  *dind = BUF_P(idx, int32_t);
    const uint8_t *skind = BUF_P(kind, uint8_t), *seng = BUF_P(eng, uint8_t);
    const double *socc = BUF_P(occ, double), *soccs = BUF_P(occs, double),
                 *slat = BUF_P(lat, double), *sfl = BUF_P(flops, double),
                 *sbf = BUF_P(bf16, double);
    const int64_t *g = BUF_P(geo, int64_t), *dptr = BUF_P(ptr, int64_t);
    double *start = BUF_P(o_s, double), *end = BUF_P(o_e, double), *busy = BUF_P(o_b, double);
    uint8_t *engs = BUF_P(o_en, uint8_t);
    Py_ssize_t R = BUF_N(geo, int64_t) / 5, ndeps = BUF_N(idx, int32_t);

    if (dptr[0] != 0 || dptr[n] > ndeps) {
        PyErr_SetString(PyExc_ValueError, "dependency indptr does not match its indices");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (dptr[i + 1] < dptr[i]) {
            PyErr_SetString(PyExc_ValueError, "dependency indptr does not match its indices");
            goto done;
        }
    for (int64_t k = 0; k < dptr[n]; k++) /* early issue reads later instructions' inputs */
        if (dind[k] < 0 || dind[k] >= n) {
            PyErr_SetString(PyExc_IndexError, "dependency index out of range");
            goto done;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (sh[i] < 0 || sh[i] >= S) {
            PyErr_SetString(PyExc_IndexError, "shape id out of range");
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
    c.sh = sh;
    c.sk = sk;
    c.skind = skind;
    c.sports = BUF_P(ports, uint8_t);
    c.socc = socc;
    c.slat = slat;
    c.sdur = BUF_P(dur, double);
    c.sfix = BUF_P(fixed, double);
    c.shid = BUF_P(hidb, double);
    c.sdb = BUF_P(dbytes, int64_t);
    c.shb = BUF_P(hbytes, int64_t);
    c.aocc = BUF_P(aoccb, double);
    c.alat = BUF_P(alatb, double);
    c.ahid = BUF_P(ahidb, double);
    c.aports = BUF_P(aportsb, uint8_t);
    c.start = start;
    c.end = end;
    c.busy = busy;
    c.engs = engs;
    c.nq = nq;
    c.window = window;
    c.qsz = nq <= 256 ? 1 : 2;
    /* engines of instructions not scheduled yet compare unequal to every engine, as the
       reference's "" placeholder does */
    memset(engs, 255, (size_t)n);
    c.hist = (Hist *)calloc((size_t)nq, sizeof(Hist));
    c.hist_of = (int32_t *)calloc((size_t)nq, sizeof(int32_t));
    c.grp = (int32_t *)malloc((size_t)nq * sizeof(int32_t));
    c.ghist = (int32_t *)malloc((size_t)nq * sizeof(int32_t));
    c.qbusy = (double *)calloc((size_t)nq, sizeof(double));
    c.qseen = (uint8_t *)calloc((size_t)nq, 1);
    c.freeat = (double *)calloc((size_t)n_eng, sizeof(double));
    c.qorder = PyList_New(0);
    if (!c.hist || !c.hist_of || !c.grp || !c.ghist || !c.qbusy || !c.qseen || !c.freeat) {
        PyErr_NoMemory();
        goto done;
    }
    if (!c.qorder || out_init(&c.gi, 1 << 12) < 0 || out_init(&c.gs, 1 << 13) < 0 ||
        out_init(&c.ge, 1 << 13) < 0 || out_init(&c.goff, 1 << 13) < 0 ||
        out_init(&c.gq, 1 << 12) < 0)
        goto done;
    c.nhist = 1; /* every queue starts with one shared, empty history */
    c.hist[0].refs = nq;
    th.cap0 = th_start;
    th.ramp = th_ramp;
    th.window = th_window;
    th.min_util = th_min;
    th.enabled = th_start < 1.0;
    for (int e = 0; e < n_eng; e++) look |= reord[e] != 0;
    look = look && rwin > 1;
    if (look) { /* reorder.Lookahead: each reordered engine's stream, by traced engine */
        L.window = rwin;
        L.aoff = aoff;
        L.dptr = dptr;
        L.dind = dind;
        L.sync_ns = sync_ns;
        L.seng = seng;
        L.placed = (uint8_t *)calloc((size_t)n + 1, 1);
        L.sidx = (int32_t *)malloc(((size_t)n + 1) * sizeof(int32_t));
        if (!L.placed || !L.sidx) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (reord[seng[sh[i]]]) L.soff[seng[sh[i]] + 1]++;
        for (int e = 0; e < 256; e++) L.soff[e + 1] += L.soff[e];
        for (int e = 0; e < 256; e++) L.head[e] = L.soff[e];
        for (Py_ssize_t i = 0; i < n; i++) /* head[] as fill cursors, then reset */
            if (reord[seng[sh[i]]]) L.sidx[L.head[seng[sh[i]]]++] = (int32_t)i;
        memset(L.head, 0, sizeof L.head);
    }

    int64_t zero = 0;
    if (out_put(&c.goff, &zero, 8) < 0) goto done;
    double flops_total = 0.0, bf16_total = 0.0, throttled = 0.0;
    int has_stat = 0;
    int64_t stat[4] = {0, 0, 0, 0};
    Py_ssize_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t s = sh[i];
        if (off + snr[s] > R) {
            PyErr_SetString(PyExc_ValueError, "region arrays shorter than the shapes need");
            goto done;
        }
        if (look && L.placed[i]) { /* issued early */
            off += snr[s];
            continue;
        }
        uint8_t e = seng[s];
        Py_ssize_t alt = -1;
        if (skind[s] == KIND_COMPUTE && aoff[s + 1] - aoff[s] > 1) { /* left to the compiler */
            alt = pick_engine(aoff[s], aoff[s + 1], aeng, c.aocc, c.ahid, c.aports, dptr, dind,
                              end, engs, i, sync_ns, c.freeat, c.sbuf_port, c.psum_port, margin);
            e = aeng[alt];
        }
        engs[i] = e;
        double ready = ready_for(dptr, dind, end, engs, i, e, sync_ns);
        if (skind[s] == KIND_DMA) {
            if (look && reord[e] && dma_ahead(&c, &L, i, e, ready) < 0) goto done;
            if (place_dma(&c, i, s, ready) < 0) goto done;
        } else if (skind[s] == KIND_TENSOR) {
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
            double st = c.freeat[e] > ready ? c.freeat[e] : ready;
            double f = throttle_factor(&th, st);
            double o = o0 / f;
            if (f < 1.0) throttled += o - o0;
            if (throttle_record(&th, st, st + o) < 0) goto done;
            flops_total += sfl[s];
            bf16_total += sbf[s];
            start[i] = st;
            busy[i] = st + o;
            end[i] = st + o + slat[s];
            c.freeat[e] = st + o;
        } else {
            if (look && reord[e] && c.freeat[e] < ready && issue_early(&c, &L, i, e, ready) < 0)
                goto done;
            place_compute(&c, i, s, e, alt, ready);
        }
        if (look) L.placed[i] = 1;
        off += snr[s];
    }
    {
        PyObject *a = out_finish(&c.gi), *b = out_finish(&c.gs), *cc = out_finish(&c.ge),
                 *d = out_finish(&c.goff), *q = out_finish(&c.gq);
        PyObject *qb = PyByteArray_FromStringAndSize((const char *)c.qbusy,
                                                     (Py_ssize_t)nq * (Py_ssize_t)sizeof(double));
        if (a && b && cc && d && q && qb)
            result = Py_BuildValue("ddLLdNNNNNNO", flops_total, bf16_total,
                                   (long long)c.hbm_total, (long long)c.dma_total, throttled, a, b,
                                   cc, d, q, qb, c.qorder);
        else {
            Py_XDECREF(a);
            Py_XDECREF(b);
            Py_XDECREF(cc);
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
    buf_release(&reordb);
    out_free(&c.gi);
    out_free(&c.gs);
    out_free(&c.ge);
    out_free(&c.goff);
    out_free(&c.gq);
    if (c.hist)
        for (Py_ssize_t k = 0; k < c.nhist; k++) {
            free(c.hist[k].st);
            free(c.hist[k].en);
        }
    free(c.hist);
    free(c.hist_of);
    free(c.grp);
    free(c.ghist);
    free(c.qbusy);
    free(c.qseen);
    free(c.freeat);
    free(L.placed);
    free(L.sidx);
    free(th.bs);
    free(th.be);
    Py_XDECREF(c.qorder);
    return result;
}
