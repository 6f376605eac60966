/* _native_encode.h: NamedTuple records -> shape ids and region geometry (encode.py).
 * Part of the _native extension: included once by _native.c (one translation unit, so the
 * static helpers stay private and the build needs no extra sources). */
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
