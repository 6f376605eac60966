/* _native_gaps.h: the gap-filling servers of the list scheduler (des/gaps.py: GapResource;
 * rules.py: DmaQueues).
 * Part of the _native extension: included once by _native.c, before _native_assign.h. */

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

/* GapResource._insert: add the free span [s, e) before interval j, merging with touching
   neighbours; -1 on error. */
static int hist_insert(Hist *h, Py_ssize_t j, double s, double e) {
    double *st = h->st, *en = h->en;
    Py_ssize_t n = h->n;
    if (j == n) {
        if (n && s == en[n - 1]) en[n - 1] = e;
        else {
            if (hist_reserve(h, n + 1) < 0) return -1;
            h->st[n] = s;
            h->en[n] = e;
            h->n = n + 1;
        }
        return 0;
    }
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
    *out = s;
    return hist_insert(h, j, s, s + dur);
}

