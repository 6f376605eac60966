/* _native_deps.h: RAW / WAR / WAW dependencies on bucketed byte ranges (deps.py).
 * Part of the _native extension: included once by _native.c (one translation unit, so the
 * static helpers stay private and the build needs no extra sources). */
/* ---------------------------------------------------------------------------------------------
 * dependencies (deps.py)
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    int64_t p0, p1, b0, b1;
    int32_t idx;  /* instruction (a later same-engine reader of the rectangle takes it over) */
    int32_t refs; /* bucket lists holding it */
    uint8_t eng, alive;
} Entry;

typedef struct {
    int32_t *a;
    Py_ssize_t n, cap;
} IdList;

typedef struct {
    IdList writes, reads;
} Bucket;

typedef struct {
    Entry *e;
    Py_ssize_t n, cap;
    int32_t *freelist;
    Py_ssize_t nfree, capfree;
} EntryPool;

static int32_t entry_new(EntryPool *p, int64_t p0, int64_t p1, int64_t b0, int64_t b1, int32_t idx,
                         uint8_t eng) {
    int32_t id;
    if (p->nfree) id = p->freelist[--p->nfree];
    else {
        if (grow((void **)&p->e, &p->cap, p->n + 1, sizeof(Entry)) < 0) return -1;
        if (p->n >= INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "too many dependency entries");
            return -1;
        }
        id = (int32_t)p->n++;
    }
    Entry *e = &p->e[id];
    e->p0 = p0;
    e->p1 = p1;
    e->b0 = b0;
    e->b1 = b1;
    e->idx = idx;
    e->refs = 0;
    e->eng = eng;
    e->alive = 1;
    return id;
}

static int entry_unref(EntryPool *p, int32_t id) {
    if (--p->e[id].refs > 0) return 0;
    if (grow((void **)&p->freelist, &p->capfree, p->nfree + 1, sizeof(int32_t)) < 0) return -1;
    p->freelist[p->nfree++] = id;
    return 0;
}

static inline int idlist_push(IdList *l, int32_t v) {
    if (l->n == l->cap && grow((void **)&l->a, &l->cap, l->n + 1, sizeof(int32_t)) < 0) return -1;
    l->a[l->n++] = v;
    return 0;
}

typedef struct {
    HMap tensors;      /* (memory code, tensor id) -> tensor index */
    int64_t *tbucket;  /* bucket size per tensor index */
    Py_ssize_t ntens, captens;
    HMap buckets;      /* (tensor index, bucket number) -> bucket index */
    Bucket *bk;
    Py_ssize_t nbk, capbk;
    EntryPool pool;
} DepState;

static void depstate_free(DepState *s) {
    hmap_free(&s->tensors);
    hmap_free(&s->buckets);
    free(s->tbucket);
    for (Py_ssize_t k = 0; k < s->nbk; k++) {
        free(s->bk[k].writes.a);
        free(s->bk[k].reads.a);
    }
    free(s->bk);
    free(s->pool.e);
    free(s->pool.freelist);
}

static int32_t bucket_get_or_new(DepState *s, int32_t t, int64_t b) {
    int32_t v = hmap_get(&s->buckets, t, b);
    if (v >= 0) return v;
    if (grow((void **)&s->bk, &s->capbk, s->nbk + 1, sizeof(Bucket)) < 0) return -1;
    if (s->nbk >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many dependency buckets");
        return -1;
    }
    v = (int32_t)s->nbk++;
    memset(&s->bk[v], 0, sizeof(Bucket));
    if (hmap_put(&s->buckets, t, b, v) < 0) return -1;
    return v;
}

/* Keep the entries of `l` that are alive and not inside the rectangle; the others die. */
static int prune(EntryPool *pool, IdList *l, int64_t p0, int64_t p1, int64_t b0, int64_t b1) {
    Py_ssize_t w = 0;
    for (Py_ssize_t k = 0; k < l->n; k++) {
        int32_t id = l->a[k];
        Entry *e = &pool->e[id];
        if (e->alive && !(p0 <= e->p0 && e->p1 <= p1 && b0 <= e->b0 && e->b1 <= b1)) {
            l->a[w++] = id;
        } else {
            e->alive = 0;
            if (entry_unref(pool, id) < 0) return -1;
        }
    }
    l->n = w;
    return 0;
}

/* Record one access (deps.py: _add). */
static int dep_add(DepState *s, int32_t t, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                   int32_t i, uint8_t eng, uint8_t dma, int is_write) {
    int64_t size = s->tbucket[t];
    int64_t lo = floordiv(b0, size), hi = floordiv((b1 > b0 + 1 ? b1 : b0 + 1) - 1, size);
    int32_t entry = -1;
    if (is_write) {
        /* entries fully covered by this write are no longer needed */
        for (int64_t b = lo; b <= hi; b++) {
            int32_t v = hmap_get(&s->buckets, t, b);
            if (v < 0) continue;
            if (prune(&s->pool, &s->bk[v].writes, p0, p1, b0, b1) < 0 ||
                prune(&s->pool, &s->bk[v].reads, p0, p1, b0, b1) < 0)
                return -1;
        }
    }
    for (int64_t b = lo; b <= hi; b++) {
        int32_t v = bucket_get_or_new(s, t, b);
        if (v < 0) return -1;
        IdList *l = is_write ? &s->bk[v].writes : &s->bk[v].reads;
        if (!is_write && l->n) {
            /* the same engine reading the same rectangle again: keep only the latest reader */
            Entry *last = &s->pool.e[l->a[l->n - 1]];
            if (last->alive && last->eng == eng && eng != dma && last->p0 == p0 && last->p1 == p1 &&
                last->b0 == b0 && last->b1 == b1) {
                last->idx = i;
                continue;
            }
        }
        if (entry < 0 && (entry = entry_new(&s->pool, p0, p1, b0, b1, i, eng)) < 0) return -1;
        if (idlist_push(l, entry) < 0) return -1;
        s->pool.e[entry].refs++;
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static PyObject *py_dependencies(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *o_shape, *o_nregs, *o_nreads, *o_seng, *o_mem, *o_geo, *o_hbm;
    long long bucket_onchip, bucket_hbm;
    int dma;
    if (!PyArg_ParseTuple(args, "nOOOOOOOLLi", &n, &o_shape, &o_nregs, &o_nreads, &o_seng, &o_mem,
                          &o_geo, &o_hbm, &bucket_onchip, &bucket_hbm, &dma))
        return NULL;
    if (n < 0 || n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "instruction count out of range");
        return NULL;
    }
    if (bucket_onchip <= 0 || bucket_hbm <= 0) {
        PyErr_SetString(PyExc_ValueError, "bucket sizes must be positive");
        return NULL;
    }
    Buf shape = {0}, nregs = {0}, nreads = {0}, seng = {0}, mem = {0}, geo = {0}, hbm = {0};
    DepState st;
    memset(&st, 0, sizeof st);
    Out ptr_o = {0}, idx_o = {0};
    int32_t *mark = NULL, *preds = NULL, *rt = NULL;
    Py_ssize_t preds_cap = 0, rt_cap = 0;
    PyObject *result = NULL;

    if (buf_get(o_shape, &shape, 4, n, 0, "shape") < 0 || buf_get(o_nregs, &nregs, 4, -1, 0, "nregs") < 0 ||
        buf_get(o_nreads, &nreads, 4, BUF_N(nregs, int32_t), 0, "nreads") < 0 ||
        buf_get(o_seng, &seng, 1, BUF_N(nregs, int32_t), 0, "shape engine") < 0 ||
        buf_get(o_mem, &mem, 1, -1, 0, "region memory") < 0 ||
        buf_get(o_geo, &geo, 8, 5 * BUF_N(mem, uint8_t), 0, "region geometry") < 0 ||
        buf_get(o_hbm, &hbm, 1, -1, 0, "is_hbm") < 0)
        goto done;
    const int32_t *sh = BUF_P(shape, int32_t), *snr = BUF_P(nregs, int32_t),
                  *snrd = BUF_P(nreads, int32_t);
    const uint8_t *se = BUF_P(seng, uint8_t), *rmem = BUF_P(mem, uint8_t),
                  *is_hbm = BUF_P(hbm, uint8_t);
    const int64_t *g = BUF_P(geo, int64_t);
    Py_ssize_t S = BUF_N(nregs, int32_t), R = BUF_N(mem, uint8_t), M = BUF_N(hbm, uint8_t);

    if (hmap_init(&st.tensors, 1024) < 0 || hmap_init(&st.buckets, 4096) < 0 ||
        out_init(&ptr_o, (n + 1) * 8) < 0 || out_init(&idx_o, n * 8) < 0)
        goto done;
    mark = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!mark) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) mark[k] = -1;
    int64_t zero = 0;
    if (out_put(&ptr_o, &zero, 8) < 0) goto done;
    Py_ssize_t off = 0;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t s = sh[i];
        if (s < 0 || s >= S) {
            PyErr_SetString(PyExc_IndexError, "shape id out of range");
            goto done;
        }
        Py_ssize_t nr = snr[s], nrd = snrd[s];
        if (off + nr > R || nrd > nr) {
            PyErr_SetString(PyExc_ValueError, "region arrays shorter than the shapes need");
            goto done;
        }
        if (grow((void **)&rt, &rt_cap, nr, sizeof(int32_t)) < 0) goto done;
        Py_ssize_t np_ = 0;
        /* reads depend on overlapping writes; writes on overlapping writes and reads */
        for (Py_ssize_t j = 0; j < nr; j++) {
            const int64_t *r = g + 5 * (off + j);
            if (rmem[off + j] >= M) {
                PyErr_SetString(PyExc_IndexError, "memory code out of range");
                goto done;
            }
            int32_t t = hmap_get(&st.tensors, rmem[off + j], r[0]);
            rt[j] = t;
            if (t < 0) continue;
            int64_t p0 = r[1], p1 = r[1] + r[2], b0 = r[3], b1 = r[4], size = st.tbucket[t];
            int64_t lo = floordiv(b0, size), hi = floordiv((b1 > b0 + 1 ? b1 : b0 + 1) - 1, size);
            int is_write = j >= nrd;
            for (int64_t b = lo; b <= hi; b++) {
                int32_t v = hmap_get(&st.buckets, t, b);
                if (v < 0) continue;
                for (int pass = 0; pass < 1 + is_write; pass++) {
                    IdList *l = pass ? &st.bk[v].reads : &st.bk[v].writes;
                    for (Py_ssize_t k = 0; k < l->n; k++) {
                        const Entry *e = &st.pool.e[l->a[k]];
                        if (e->alive && e->p0 < p1 && p0 < e->p1 && e->b0 < b1 && b0 < e->b1 &&
                            mark[e->idx] != (int32_t)i && e->idx != (int32_t)i) {
                            mark[e->idx] = (int32_t)i;
                            if (grow((void **)&preds, &preds_cap, np_ + 1, sizeof(int32_t)) < 0)
                                goto done;
                            preds[np_++] = e->idx;
                        }
                    }
                }
            }
        }
        if (np_ > 1) qsort(preds, (size_t)np_, sizeof(int32_t), cmp_i32);
        total += np_;
        if (out_put(&idx_o, preds, np_ * (Py_ssize_t)sizeof(int32_t)) < 0 ||
            out_put(&ptr_o, &total, 8) < 0)
            goto done;
        /* record this instruction's accesses */
        for (Py_ssize_t j = 0; j < nr; j++) {
            const int64_t *r = g + 5 * (off + j);
            int32_t t = rt[j];
            if (t < 0) t = hmap_get(&st.tensors, rmem[off + j], r[0]); /* made by an earlier access */
            if (t < 0) {
                if (grow((void **)&st.tbucket, &st.captens, st.ntens + 1, sizeof(int64_t)) < 0)
                    goto done;
                if (st.ntens >= INT32_MAX) {
                    PyErr_SetString(PyExc_OverflowError, "too many tensors");
                    goto done;
                }
                t = (int32_t)st.ntens++;
                st.tbucket[t] = is_hbm[rmem[off + j]] ? bucket_hbm : bucket_onchip;
                if (hmap_put(&st.tensors, rmem[off + j], r[0], t) < 0) goto done;
            }
            if (dep_add(&st, t, r[1], r[1] + r[2], r[3], r[4], (int32_t)i, se[s], (uint8_t)dma,
                        j >= nrd) < 0)
                goto done;
        }
        off += nr;
    }
    if (off != R) {
        PyErr_SetString(PyExc_ValueError, "region arrays longer than the shapes need");
        goto done;
    }
    {
        PyObject *p = out_finish(&ptr_o), *x = out_finish(&idx_o);
        if (p && x) result = Py_BuildValue("NN", p, x);
        else {
            Py_XDECREF(p);
            Py_XDECREF(x);
        }
    }
done:
    buf_release(&shape);
    buf_release(&nregs);
    buf_release(&nreads);
    buf_release(&seng);
    buf_release(&mem);
    buf_release(&geo);
    buf_release(&hbm);
    depstate_free(&st);
    out_free(&ptr_o);
    out_free(&idx_o);
    free(mark);
    free(preds);
    free(rt);
    return result;
}
