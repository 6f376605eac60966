/* Native dependency analysis and list scheduling for trnsim's timing model.
 *
 * Three functions, each the exact counterpart of Python code that stays the reference:
 *   encode        one pass over a trace's NamedTuple records -> shape ids and region geometry
 *                 (encode.py: encode_py)
 *   dependencies  RAW / WAR / WAW on bucketed byte ranges (deps.py)
 *   schedule      in-order engines, DMA queues, PE throttle, v2 shared ports (scheduler.py)
 * Every figure (bucket sizes, latencies, queue counts, throttle constants) comes in as an argument
 * from the Python side, which reads it from the CostModel / hardware data.  Floating-point
 * operations are done in the same order as the Python code, so results are bit-identical
 * (built with -ffp-contract=off so no multiply-add is fused).
 * Outputs of unknown length are grown inside bytearrays that numpy then wraps without a copy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------------------------------------
 * encode: NamedTuple records -> shape ids, region memory codes and geometry
 * ------------------------------------------------------------------------------------------- */

static PyObject *NotTuples = NULL; /* raised for records the C encoder cannot read */

enum { I_ENGINE, I_OPCODE, I_READS, I_WRITES, I_PARTS, I_FREE, I_DIN, I_DOUT, I_ATTRS, I_NFIELDS };
enum { R_MEMORY, R_TENSOR, R_PARTITION, R_PARTITIONS, R_START, R_STOP, R_ELEMENTS, R_DTYPE,
       R_CONTIG, R_INDIRECT, R_NFIELDS };
/* region fields of the shape key (what the CostModel reads) and of the geometry */
static const int SHAPE_FIELDS[] = {R_MEMORY, R_PARTITIONS, R_ELEMENTS, R_DTYPE, R_CONTIG,
                                   R_INDIRECT};
static const int GEO_FIELDS[] = {R_TENSOR, R_PARTITION, R_PARTITIONS, R_START, R_STOP};
static const int INS_KEY_FIELDS[] = {I_ENGINE, I_OPCODE, I_PARTS, I_FREE, I_DIN, I_DOUT, I_ATTRS};

static int read_fields(PyObject *seq, int *out, int n, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected a tuple of %d field indices", what, n);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(seq, k));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative field index", what);
            return -1;
        }
        out[k] = (int)v;
    }
    return 0;
}

/* Index of `name` in `names` (equality), appending it when absent; -1 on error. */
static Py_ssize_t name_code(PyObject *names, PyObject *name) {
    Py_ssize_t m = PyList_GET_SIZE(names);
    for (Py_ssize_t k = 0; k < m; k++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(names, k), name, Py_EQ);
        if (eq < 0) return -1;
        if (eq) return k;
    }
    if (PyList_Append(names, name) < 0) return -1;
    return m;
}

static inline int tuple_with(PyObject *o, int min_size) {
    return PyTuple_Check(o) && PyTuple_GET_SIZE(o) > min_size;
}

/* Field-by-field equality of the shape keys of two records (both already checked). */
static int same_shape(PyObject *a, PyObject *b, const int *fi, const int *fr) {
    for (size_t k = 0; k < sizeof(INS_KEY_FIELDS) / sizeof(int); k++) {
        int f = fi[INS_KEY_FIELDS[k]];
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(a, f), PyTuple_GET_ITEM(b, f), Py_EQ);
        if (eq <= 0) return eq;
    }
    for (int side = 0; side < 2; side++) {
        int f = fi[side ? I_WRITES : I_READS];
        PyObject *ra = PyTuple_GET_ITEM(a, f), *rb = PyTuple_GET_ITEM(b, f);
        Py_ssize_t n = PyTuple_GET_SIZE(ra);
        if (PyTuple_GET_SIZE(rb) != n) return 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *x = PyTuple_GET_ITEM(ra, j), *y = PyTuple_GET_ITEM(rb, j);
            for (size_t k = 0; k < sizeof(SHAPE_FIELDS) / sizeof(int); k++) {
                int g = fr[SHAPE_FIELDS[k]];
                int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(x, g), PyTuple_GET_ITEM(y, g),
                                                  Py_EQ);
                if (eq <= 0) return eq;
            }
        }
    }
    return 1;
}

static inline uint64_t hcombine(uint64_t h, uint64_t x) {
    return (h ^ x) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
}

/* Fold the hash of ``o`` into ``*h``; an unhashable value clears ``*hashable`` (the shape is then
   not memoized) and counts as 0.  Returns -1 on any other error. */
static int hash_into(uint64_t *h, PyObject *o, int *hashable) {
    Py_hash_t x = PyObject_Hash(o);
    if (x == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
        PyErr_Clear();
        *hashable = 0;
        x = 0;
    }
    *h = hcombine(*h, (uint64_t)x);
    return 0;
}

/* Check that `item` is an Instruction tuple of Region tuples and hash its shape key.  Sets
   *hashable to 0 when some key field cannot be hashed (such a record is a shape of its own, as
   in encode_py).  Returns the number of regions, or -1 with an exception set. */
static Py_ssize_t shape_hash(PyObject *item, const int *fi, const int *fr, int imax, int rmax,
                             uint64_t *hash, int *hashable) {
    if (!tuple_with(item, imax)) {
        PyErr_SetString(NotTuples, "trace records are not Instruction tuples");
        return -1;
    }
    PyObject *rw[2] = {PyTuple_GET_ITEM(item, fi[I_READS]), PyTuple_GET_ITEM(item, fi[I_WRITES])};
    if (!PyTuple_Check(rw[0]) || !PyTuple_Check(rw[1])) {
        PyErr_SetString(NotTuples, "reads / writes are not tuples");
        return -1;
    }
    uint64_t h = 0x84222325cbf29ce4ULL;
    *hashable = 1;
    for (size_t k = 0; k < sizeof(INS_KEY_FIELDS) / sizeof(int); k++)
        if (hash_into(&h, PyTuple_GET_ITEM(item, fi[INS_KEY_FIELDS[k]]), hashable) < 0) return -1;
    Py_ssize_t nregs = 0;
    for (int side = 0; side < 2; side++) {
        Py_ssize_t m = PyTuple_GET_SIZE(rw[side]);
        h = hcombine(h, (uint64_t)m);
        nregs += m;
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *r = PyTuple_GET_ITEM(rw[side], j);
            if (!tuple_with(r, rmax)) {
                PyErr_SetString(NotTuples, "regions are not Region tuples");
                return -1;
            }
            for (size_t k = 0; k < sizeof(SHAPE_FIELDS) / sizeof(int); k++)
                if (hash_into(&h, PyTuple_GET_ITEM(r, fr[SHAPE_FIELDS[k]]), hashable) < 0)
                    return -1;
        }
    }
    *hash = mix64(h);
    return nregs;
}

/* Shapes known so far: a hash table over the representatives and their regions' memory codes. */
typedef struct {
    HMap table;       /* (hash, probe) -> shape id */
    uint8_t *mem;     /* memory codes of each shape's regions */
    Py_ssize_t *off;  /* shape s: mem[off[s]:off[s + 1]] */
    Py_ssize_t mem_cap, off_cap, nmem;
} Shapes;

static void shapes_free(Shapes *t) {
    hmap_free(&t->table);
    free(t->mem);
    free(t->off);
}

/* Register `item` as shape `sid` (the reps list already holds it). */
static int shapes_add(Shapes *t, PyObject *item, int32_t sid, uint64_t h, int hashable,
                      Py_ssize_t nregs, const int *fi, const int *fr, PyObject *engines,
                      PyObject *memories) {
    if (name_code(engines, PyTuple_GET_ITEM(item, fi[I_ENGINE])) < 0) return -1;
    if (grow((void **)&t->off, &t->off_cap, (Py_ssize_t)sid + 2, sizeof(Py_ssize_t)) < 0 ||
        grow((void **)&t->mem, &t->mem_cap, t->nmem + nregs, 1) < 0)
        return -1;
    t->off[sid] = t->nmem;
    for (int side = 0; side < 2; side++) {
        PyObject *regs = PyTuple_GET_ITEM(item, fi[side ? I_WRITES : I_READS]);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(regs); j++) {
            Py_ssize_t c = name_code(memories, PyTuple_GET_ITEM(PyTuple_GET_ITEM(regs, j),
                                                                fr[R_MEMORY]));
            if (c < 0) return -1;
            if (c > 255) {
                PyErr_SetString(PyExc_ValueError, "more than 256 memory names");
                return -1;
            }
            t->mem[t->nmem++] = (uint8_t)c;
        }
    }
    t->off[sid + 1] = t->nmem;
    if (hashable) {
        int64_t probe = 0;
        while (hmap_get(&t->table, (int64_t)h, probe) >= 0) probe++;
        if (hmap_put(&t->table, (int64_t)h, probe, sid) < 0) return -1;
    }
    return 0;
}

/* encode(records, ins_fields, region_fields, engines, memories, reps) -> (n, shape, mem, geo)
   Shapes are numbered in order of first appearance, continuing the lists `reps`, `engines` and
   `memories`, which are extended in place (so a trace can be encoded in several calls). */
static PyObject *py_encode(PyObject *self, PyObject *args) {
    PyObject *instrs, *ifields, *rfields, *engines, *memories, *reps;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!", &instrs, &PyTuple_Type, &ifields, &PyTuple_Type,
                          &rfields, &PyList_Type, &engines, &PyList_Type, &memories, &PyList_Type,
                          &reps))
        return NULL;
    int fi[I_NFIELDS], fr[R_NFIELDS];
    if (read_fields(ifields, fi, I_NFIELDS, "instruction fields") < 0 ||
        read_fields(rfields, fr, R_NFIELDS, "region fields") < 0)
        return NULL;
    int imax = 0, rmax = 0;
    for (int k = 0; k < I_NFIELDS; k++) imax = fi[k] > imax ? fi[k] : imax;
    for (int k = 0; k < R_NFIELDS; k++) rmax = fr[k] > rmax ? fr[k] : rmax;

    PyObject *it = NULL, *item = NULL, *result = NULL;
    Out shape_o = {0}, mem_o = {0}, geo_o = {0};
    Shapes sh;
    memset(&sh, 0, sizeof sh);
    Py_ssize_t n = 0;
    int32_t nshapes = 0;

    if (out_init(&shape_o, 1 << 12) < 0 || out_init(&mem_o, 1 << 12) < 0 ||
        out_init(&geo_o, 1 << 15) < 0 || hmap_init(&sh.table, 256) < 0)
        goto done;
    /* the shapes of earlier calls */
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(reps); k++) {
        PyObject *rep = PyList_GET_ITEM(reps, k);
        uint64_t h;
        int hashable;
        Py_ssize_t nregs = shape_hash(rep, fi, fr, imax, rmax, &h, &hashable);
        if (nregs < 0 || shapes_add(&sh, rep, nshapes++, h, hashable, nregs, fi, fr, engines,
                                    memories) < 0)
            goto done;
    }
    it = PyObject_GetIter(instrs);
    if (!it) goto done;
    while ((item = PyIter_Next(it)) != NULL) {
        uint64_t h;
        int hashable;
        Py_ssize_t nregs = shape_hash(item, fi, fr, imax, rmax, &h, &hashable);
        if (nregs < 0) goto done;
        int32_t sid = -1;
        if (hashable) {
            /* an equal key among the shapes with this hash (table keys are (hash, probe)) */
            for (int64_t probe = 0;; probe++) {
                int32_t v = hmap_get(&sh.table, (int64_t)h, probe);
                if (v < 0) break;
                int eq = same_shape(item, PyList_GET_ITEM(reps, v), fi, fr);
                if (eq < 0) goto done;
                if (eq) {
                    sid = v;
                    break;
                }
            }
        }
        if (sid < 0) { /* a new shape: this record represents it */
            if (nshapes == INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "too many instruction shapes");
                goto done;
            }
            sid = nshapes++;
            if (PyList_Append(reps, item) < 0 ||
                shapes_add(&sh, item, sid, h, hashable, nregs, fi, fr, engines, memories) < 0)
                goto done;
        }
        for (int side = 0; side < 2; side++) {
            PyObject *regs = PyTuple_GET_ITEM(item, fi[side ? I_WRITES : I_READS]);
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(regs); j++) {
                PyObject *r = PyTuple_GET_ITEM(regs, j);
                int64_t g[5];
                for (int k = 0; k < 5; k++) {
                    g[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(r, fr[GEO_FIELDS[k]]));
                    if (g[k] == -1 && PyErr_Occurred()) goto done;
                }
                if (out_put(&geo_o, g, sizeof g) < 0) goto done;
            }
        }
        if (out_put(&shape_o, &sid, sizeof sid) < 0 ||
            out_put(&mem_o, sh.mem + sh.off[sid], sh.off[sid + 1] - sh.off[sid]) < 0)
            goto done;
        n++;
        Py_CLEAR(item);
    }
    if (PyErr_Occurred()) goto done;
    {
        PyObject *s1 = out_finish(&shape_o), *m = out_finish(&mem_o), *g = out_finish(&geo_o);
        if (s1 && m && g) result = Py_BuildValue("nNNN", n, s1, m, g);
        else {
            Py_XDECREF(s1);
            Py_XDECREF(m);
            Py_XDECREF(g);
        }
    }
done:
    Py_XDECREF(item);
    Py_XDECREF(it);
    out_free(&shape_o);
    out_free(&mem_o);
    out_free(&geo_o);
    shapes_free(&sh);
    return result;
}

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

/* ---------------------------------------------------------------------------------------------
 * schedule (scheduler.py)
 * ------------------------------------------------------------------------------------------- */

/* Busy intervals of one DMA engine, merged (scheduler.py: _EngineGaps). */
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

/* _EngineGaps.place: the start of a transfer of `dur` ready at `ready`; -1 on error. */
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

/* dI/dt cap of the Tensor engine (scheduler.py: _Throttle); busy intervals in a ring buffer. */
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
enum { PORT_SBUF = 1, PORT_PSUM = 2 };

static PyObject *py_schedule(PyObject *self, PyObject *args) {
    Py_ssize_t n, window;
    int n_eng, nq;
    double sync_ns, th_start, th_ramp, th_window, th_min;
    PyObject *o_shape, *o_kind, *o_eng, *o_nreads, *o_nregs, *o_occ, *o_occs, *o_lat, *o_flops,
        *o_bf16, *o_dbytes, *o_hbytes, *o_k, *o_dur, *o_fixed, *o_ports, *o_geo, *o_ptr, *o_idx,
        *o_start, *o_end, *o_busy, *o_engout;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOOOOOOOOOOOOOOOOiidddddn", &n, &o_shape, &o_kind,
                          &o_eng, &o_nreads, &o_nregs, &o_occ, &o_occs, &o_lat, &o_flops, &o_bf16,
                          &o_dbytes, &o_hbytes, &o_k, &o_dur, &o_fixed, &o_ports, &o_geo, &o_ptr,
                          &o_idx, &o_start, &o_end, &o_busy, &o_engout, &n_eng, &nq, &sync_ns,
                          &th_start, &th_ramp, &th_window, &th_min, &window))
        return NULL;
    if (n < 0 || n > INT32_MAX || nq < 1 || nq > 65535 || n_eng < 1 || n_eng > 255 || window < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "instruction count, queue count, engine count or gap window out of range");
        return NULL;
    }
    Buf shape = {0}, kind = {0}, eng = {0}, nreads = {0}, nregs = {0}, occ = {0}, occs = {0},
        lat = {0}, flops = {0}, bf16 = {0}, dbytes = {0}, hbytes = {0}, kq = {0}, dur = {0},
        fixed = {0}, ports = {0}, geo = {0}, ptr = {0}, idx = {0}, o_s = {0}, o_e = {0},
        o_b = {0}, o_en = {0};
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
        buf_get(o_busy, &o_b, 8, n, 1, "busy_end") < 0 || buf_get(o_engout, &o_en, 1, n, 1, "engine out") < 0)
        goto done;
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
        double st, o;
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
            st = freeat[e] > ready ? freeat[e] : ready;
            o = socc[s];
            uint8_t pf = sports[s];
            if ((pf & PORT_SBUF) && sbuf_port > st) st = sbuf_port;
            if ((pf & PORT_PSUM) && psum_port > st) st = psum_port;
            if (pf & PORT_SBUF) sbuf_port = st + o;
            if (pf & PORT_PSUM) psum_port = st + o;
        }
        start[i] = st;
        busy[i] = st + o;
        end[i] = st + o + slat[s];
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

/* ---------------------------------------------------------------------------------------------
 * module
 * ------------------------------------------------------------------------------------------- */

static PyObject *py_set_not_tuples(PyObject *self, PyObject *exc) {
    if (!PyExceptionClass_Check(exc)) {
        PyErr_SetString(PyExc_TypeError, "expected an exception class");
        return NULL;
    }
    Py_INCREF(exc);
    Py_XSETREF(NotTuples, exc);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"encode", py_encode, METH_VARARGS,
     "encode(records, ins_fields, region_fields, engines, memories, reps) -> (n, shape, mem, geo)"},
    {"dependencies", py_dependencies, METH_VARARGS,
     "dependencies(n, shape, nregs, nreads, shape_engine, reg_mem, reg_geo, is_hbm, "
     "bucket_onchip, bucket_hbm, dma_code) -> (indptr, indices)"},
    {"schedule", py_schedule, METH_VARARGS, "list-schedule an encoded trace (see native.py)"},
    {"set_not_tuples", py_set_not_tuples, METH_O, "set the exception raised for non-tuple records"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native",
                                       "Native dependency analysis and list scheduling.", -1,
                                       methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    NotTuples = PyExc_TypeError;
    Py_INCREF(NotTuples);
    return PyModule_Create(&moduledef);
}
