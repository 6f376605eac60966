/* _native_util.h: growable outputs, buffer access, a hash map, array growth.
 * Part of the _native extension: included once by _native.c (one translation unit, so the
 * static helpers stay private and the build needs no extra sources). */
/* ---------------------------------------------------------------------------------------------
 * Small utilities
 * ------------------------------------------------------------------------------------------- */

/* A bytearray used as a growable output buffer (amortized doubling). */
typedef struct {
    PyObject *ba;
    Py_ssize_t n, cap; /* bytes */
} Out;

static int out_init(Out *o, Py_ssize_t cap) {
    o->n = 0;
    o->cap = cap < 64 ? 64 : cap;
    o->ba = PyByteArray_FromStringAndSize(NULL, o->cap);
    return o->ba ? 0 : -1;
}

static int out_grow(Out *o, Py_ssize_t need) {
    Py_ssize_t cap = o->cap;
    while (cap < o->n + need) cap *= 2;
    if (PyByteArray_Resize(o->ba, cap) < 0) return -1;
    o->cap = cap;
    return 0;
}

static inline int out_put(Out *o, const void *src, Py_ssize_t nb) {
    if (o->n + nb > o->cap && out_grow(o, nb) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(o->ba) + o->n, src, (size_t)nb);
    o->n += nb;
    return 0;
}

/* Trim to the bytes written and hand the bytearray over (the Out no longer owns it). */
static PyObject *out_finish(Out *o) {
    PyObject *ba = o->ba;
    o->ba = NULL;
    if (PyByteArray_Resize(ba, o->n) < 0) {
        Py_DECREF(ba);
        return NULL;
    }
    return ba;
}

static void out_free(Out *o) { Py_CLEAR(o->ba); }

/* Contiguous input array with a checked element size and count (count < 0: any). */
typedef struct {
    Py_buffer b;
    int held;
} Buf;

static int buf_get(PyObject *obj, Buf *buf, Py_ssize_t itemsize, Py_ssize_t count, int writable,
                   const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->b, flags) < 0) return -1;
    buf->held = 1;
    if (buf->b.itemsize != itemsize && !(buf->b.itemsize == 1 && buf->b.len % itemsize == 0)) {
        PyErr_Format(PyExc_ValueError, "%s: expected items of %zd bytes, got %zd", name, itemsize,
                     buf->b.itemsize);
        return -1;
    }
    if (count >= 0 && buf->b.len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items, got %zd", name, count,
                     buf->b.len / itemsize);
        return -1;
    }
    return 0;
}

static void buf_release(Buf *buf) {
    if (buf->held) PyBuffer_Release(&buf->b);
    buf->held = 0;
}

#define BUF_N(bf, T) ((Py_ssize_t)((bf).b.len / (Py_ssize_t)sizeof(T)))
#define BUF_P(bf, T) ((T *)(bf).b.buf)

/* Python's floor division (byte offsets may in principle be negative). */
static inline int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

static inline uint64_t mix64(uint64_t x) { /* splitmix64 finalizer */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Open-addressing map from a pair of int64 to an int32 (>= 0). */
typedef struct {
    int64_t a, b;
    int32_t v;
} HEnt;

typedef struct {
    HEnt *t;
    size_t cap, n; /* cap is a power of two */
} HMap;

static int hmap_init(HMap *m, size_t cap) {
    m->cap = cap;
    m->n = 0;
    m->t = (HEnt *)malloc(cap * sizeof(HEnt));
    if (!m->t) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < cap; i++) m->t[i].v = -1;
    return 0;
}

static inline size_t hmap_slot(const HMap *m, int64_t a, int64_t b) {
    uint64_t h = mix64((uint64_t)a * 0x9e3779b97f4a7c15ULL ^ mix64((uint64_t)b));
    size_t i = (size_t)h & (m->cap - 1);
    while (m->t[i].v >= 0 && !(m->t[i].a == a && m->t[i].b == b)) i = (i + 1) & (m->cap - 1);
    return i;
}

static inline int32_t hmap_get(const HMap *m, int64_t a, int64_t b) {
    return m->t[hmap_slot(m, a, b)].v;
}

static int hmap_put(HMap *m, int64_t a, int64_t b, int32_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        HMap bigger;
        if (hmap_init(&bigger, m->cap * 2) < 0) return -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->t[i].v >= 0) bigger.t[hmap_slot(&bigger, m->t[i].a, m->t[i].b)] = m->t[i];
        bigger.n = m->n;
        free(m->t);
        *m = bigger;
    }
    size_t i = hmap_slot(m, a, b);
    if (m->t[i].v < 0) m->n++;
    m->t[i].a = a;
    m->t[i].b = b;
    m->t[i].v = v;
    return 0;
}

static void hmap_free(HMap *m) {
    free(m->t);
    m->t = NULL;
}

/* Grow a malloc'd array to hold at least `need` items. */
static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * item);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = c;
    return 0;
}
