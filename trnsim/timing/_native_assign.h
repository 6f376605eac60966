/* _native_assign.h: engine assignment (assign.py) and the access-bubble overlap of the compute
 * engines (scheduler.py), for the list scheduler in _native_schedule.h.
 * Part of the _native extension: included once by _native.c, before _native_schedule.h. */

enum { PORT_SBUF = 1, PORT_PSUM = 2 };

/* assign.IN_ORDER_ENGINE's code, set by each schedule call from its argument (-1: none) */
static int in_order_engine = -1;

/* assign.ready: the latest end of the predecessors of instruction i, plus the cross-engine
   semaphore when the producer ran on another engine than `e`; on the in-order engine its own
   earlier instructions count as ready */
static inline double ready_for(const int64_t *dptr, const int32_t *dind, const double *end,
                               const uint8_t *engs, Py_ssize_t i, uint8_t e, double sync_ns) {
    double ready = 0.0;
    for (int64_t k = dptr[i]; k < dptr[i + 1]; k++) {
        int32_t p = dind[k];
        if ((int)e == in_order_engine && engs[p] == e) continue;
        double r = end[p];
        if (sync_ns != 0.0 && engs[p] != e) r += sync_ns;
        if (r > ready) ready = r;
    }
    return ready;
}

/* scheduler.schedule_py: occupancy `o` less the part of the access bubble (`hid`) that overlaps
   the previous instruction on an engine free at `freeat`, for an instruction ready at `ready` */
static inline double overlap_occ(double o, double hid, double freeat, double ready) {
    if (hid != 0.0 && freeat > ready) {
        double sl = freeat - ready;
        o -= hid < sl ? hid : sl;
    }
    return o;
}

/* assign.assign (earliest_finish): the alternative in [a0, a1) on which the instruction finishes
   first; a non-default one (a > a0) pays `margin`; ties keep the earlier alternative */
static Py_ssize_t pick_engine(Py_ssize_t a0, Py_ssize_t a1, const uint8_t *aeng, const double *aocc,
                              const double *ahid, const uint8_t *aports, const int64_t *dptr,
                              const int32_t *dind, const double *end, const uint8_t *engs,
                              Py_ssize_t i, double sync_ns, const double *freeat, double sbuf_port,
                              double psum_port, double margin) {
    Py_ssize_t best = a0;
    double best_score = 0.0;
    for (Py_ssize_t a = a0; a < a1; a++) {
        uint8_t e = aeng[a];
        double r = ready_for(dptr, dind, end, engs, i, e, sync_ns);
        double st = freeat[e] > r ? freeat[e] : r;
        if ((aports[a] & PORT_SBUF) && sbuf_port > st) st = sbuf_port;
        if ((aports[a] & PORT_PSUM) && psum_port > st) st = psum_port;
        double score = st + overlap_occ(aocc[a], ahid[a], freeat[e], r);
        if (a > a0) score += margin;
        if (a == a0 || score < best_score) {
            best = a;
            best_score = score;
        }
    }
    return best;
}
