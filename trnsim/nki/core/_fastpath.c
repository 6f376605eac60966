/* Hot numeric kernels of the functional core, each the exact counterpart of a numpy expression
 * that stays the reference (trnsim/nki/core/fastpath.py selects between them):
 *
 *   binary_to_bf16(op, a, b, out)   out = bf16_rne(f32(a) op f32(b)), op in add/subtract/multiply,
 *                                   a and b fp32 or bf16 (bf16 passed as a uint16 view), any
 *                                   strides; numpy: (np.<op>(a.astype(f32), b.astype(f32)))
 *                                   .astype(bfloat16)  -- one pass instead of four, no temporaries
 *   f32_to_bf16(src, out)           out = bf16_rne(src): ml_dtypes' fp32 -> bfloat16 cast
 *   view_key(key)                   subscript.py's _view_key (the reused-view cache key)
 *   gemm_acc(c, a, b)               c += a.T @ b for fp32 a (K, M), b (K, N), c (M, N) through
 *                                   numpy's own cblas_sgemm (beta = 1; set_sgemm hands over its
 *                                   address): numpy's matmul makes the same call with beta = 0,
 *                                   so the product is summed in the same order, and adding it to
 *                                   c once rounds as np.add does -- no product temporary; declined
 *                                   (False) where c holds a NaN (see py_gemm_acc)
 *   gemm_submit / gemm_drain        the same call on a worker thread, in order (the queue:
 *                                   _fastpath_queue.h)
 * out may be an input element for element (same address and strides), never overlap it otherwise.
 *
 * Rounding: round to nearest, ties to even; NaN becomes the quiet NaN 0x7fc0 with the input's
 * sign (what ml_dtypes does); overflow rounds to +-inf; subnormals are kept (no flush).
 * Built with -ffp-contract=off: the fp32 operation is one IEEE operation, as numpy's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAXDIM 8

static inline uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: canonical quiet NaN, sign kept */
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    u += 0x7fffu + ((u >> 16) & 1u); /* carries into the exponent: overflow becomes inf */
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* an operand: fp32 or bf16 (as uint16) elements at byte strides */
typedef struct {
    Py_buffer view;
    int is_bf16;
} operand;

static int get_operand(PyObject *o, operand *op, int writable, const char *what) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &op->view, flags) < 0)
        return -1;
    const char *f = op->view.format ? op->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (strcmp(f, "f") == 0 && op->view.itemsize == 4)
        op->is_bf16 = 0;
    else if (strcmp(f, "H") == 0 && op->view.itemsize == 2)
        op->is_bf16 = 1;
    else {
        PyErr_Format(PyExc_TypeError, "%s: expected float32 or uint16 (bfloat16 bits), got '%s'",
                     what, f);
        PyBuffer_Release(&op->view);
        return -1;
    }
    if (op->view.ndim > MAXDIM) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d dims", what, MAXDIM);
        PyBuffer_Release(&op->view);
        return -1;
    }
    return 0;
}

static int same_shape(const Py_buffer *a, const Py_buffer *b) {
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

/* a NaN result carries the NaN operand of x86's (and numpy's) addps/subps/mulps: the first one;
 * an invalid operation (inf - inf, 0 * inf) gives the hardware's default NaN */
static inline float nan_pick(float r, float x, float y) {
    if (r != r)
        return (x != x) ? x : ((y != y) ? y : r);
    return r;
}

static inline float load(const char *p, int is_bf16) {
    if (is_bf16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* x86-64 Linux with GCC/clang: the contiguous loops are also compiled for AVX2 and picked at load
 * time (the baseline build only has SSE2); elsewhere one portable version */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

#define NAN_BITS(u) (((u) & 0x7fffffffu) > 0x7f800000u)

/* bf16_rne without its NaN branch, so the contiguous loops vectorize: a NaN result gets wrong
 * bits here, and the loop's NaN flag makes the caller redo that row with bf16_rne */
static inline uint16_t bf16_rne_nonan(uint32_t u) {
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* contiguous rows: returns nonzero when a result was NaN (its sign then comes from nan_pick, which
 * the caller applies on a second, careful pass over the row) */
#define FAST(NAME, TA, LA, TB, LB)                                                              \
    CLONES static int NAME(int opc, const TA *a, const TB *b, uint16_t *o, Py_ssize_t n) {    \
        uint32_t bad = 0;                                                                      \
        if (opc == 0) {                                                                        \
            for (Py_ssize_t i = 0; i < n; i++) {                                               \
                float r = LA(a[i]) + LB(b[i]);                                                 \
                uint32_t u;                                                                    \
                memcpy(&u, &r, 4);                                                             \
                bad |= NAN_BITS(u);                                                            \
                o[i] = bf16_rne_nonan(u);                                                      \
            }                                                                                  \
        } else if (opc == 1) {                                                                 \
            for (Py_ssize_t i = 0; i < n; i++) {                                               \
                float r = LA(a[i]) - LB(b[i]);                                                 \
                uint32_t u;                                                                    \
                memcpy(&u, &r, 4);                                                             \
                bad |= NAN_BITS(u);                                                            \
                o[i] = bf16_rne_nonan(u);                                                      \
            }                                                                                  \
        } else {                                                                               \
            for (Py_ssize_t i = 0; i < n; i++) {                                               \
                float r = LA(a[i]) * LB(b[i]);                                                 \
                uint32_t u;                                                                    \
                memcpy(&u, &r, 4);                                                             \
                bad |= NAN_BITS(u);                                                            \
                o[i] = bf16_rne_nonan(u);                                                      \
            }                                                                                  \
        }                                                                                      \
        return bad != 0;                                                                       \
    }

#define ID(x) (x)
FAST(fast_hf, uint16_t, bf16_to_f32, float, ID)
FAST(fast_fh, float, ID, uint16_t, bf16_to_f32)
FAST(fast_hh, uint16_t, bf16_to_f32, uint16_t, bf16_to_f32)
FAST(fast_ff, float, ID, float, ID)

/* any strides, every NaN result signed as numpy's loop signs it */
static void careful_row(int opc, const char *pa, Py_ssize_t sa, int abf, const char *pb,
                        Py_ssize_t sb, int bbf, char *po, Py_ssize_t so, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        float x = load(pa + i * sa, abf), y = load(pb + i * sb, bbf), r;
        switch (opc) {
        case 0: r = x + y; break;
        case 1: r = x - y; break;
        default: r = x * y; break;
        }
        uint16_t h = bf16_rne(nan_pick(r, x, y));
        memcpy(po + i * so, &h, 2);
    }
}

/* the innermost dim: a vectorised pass when every operand is contiguous there, in chunks through
 * a stack buffer, so a NaN chunk is redone from inputs that out has not overwritten yet (out may
 * be an input element for element: x[...] = x + y) */
#define CHUNK 2048
static void row(int opc, const char *pa, Py_ssize_t sa, int abf, const char *pb, Py_ssize_t sb,
                int bbf, char *po, Py_ssize_t so, Py_ssize_t n) {
    if (!(so == 2 && sa == (abf ? 2 : 4) && sb == (bbf ? 2 : 4))) {
        careful_row(opc, pa, sa, abf, pb, sb, bbf, po, so, n); /* reads each element first */
        return;
    }
    uint16_t tmp[CHUNK];
    for (Py_ssize_t s = 0; s < n; s += CHUNK) {
        Py_ssize_t k = n - s < CHUNK ? n - s : CHUNK;
        const char *qa = pa + s * sa, *qb = pb + s * sb;
        int bad;
        if (abf && bbf)
            bad = fast_hh(opc, (const uint16_t *)qa, (const uint16_t *)qb, tmp, k);
        else if (abf)
            bad = fast_hf(opc, (const uint16_t *)qa, (const float *)qb, tmp, k);
        else if (bbf)
            bad = fast_fh(opc, (const float *)qa, (const uint16_t *)qb, tmp, k);
        else
            bad = fast_ff(opc, (const float *)qa, (const float *)qb, tmp, k);
        if (bad)
            careful_row(opc, qa, sa, abf, qb, sb, bbf, (char *)tmp, 2, k);
        memcpy(po + s * 2, tmp, (size_t)k * 2);
    }
}

static void walk(int opc, int dim, int ndim, const Py_ssize_t *shape, const char *pa,
                 const Py_ssize_t *sa, int abf, const char *pb, const Py_ssize_t *sb, int bbf,
                 char *po, const Py_ssize_t *so) {
    if (dim == ndim - 1) {
        row(opc, pa, sa[dim], abf, pb, sb[dim], bbf, po, so[dim], shape[dim]);
        return;
    }
    for (Py_ssize_t i = 0; i < shape[dim]; i++)
        walk(opc, dim + 1, ndim, shape, pa + i * sa[dim], sa, abf, pb + i * sb[dim], sb, bbf,
             po + i * so[dim], so);
}

static PyObject *py_binary_to_bf16(PyObject *self, PyObject *args) {
    int opc;
    PyObject *oa, *ob, *oo;
    if (!PyArg_ParseTuple(args, "iOOO", &opc, &oa, &ob, &oo))
        return NULL;
    if (opc < 0 || opc > 2) {
        PyErr_SetString(PyExc_ValueError, "op code: 0 add, 1 subtract, 2 multiply");
        return NULL;
    }
    operand a, b, o;
    if (get_operand(oa, &a, 0, "a") < 0)
        return NULL;
    if (get_operand(ob, &b, 0, "b") < 0) {
        PyBuffer_Release(&a.view);
        return NULL;
    }
    if (get_operand(oo, &o, 1, "out") < 0) {
        PyBuffer_Release(&a.view);
        PyBuffer_Release(&b.view);
        return NULL;
    }
    PyObject *ret = NULL;
    if (!o.is_bf16)
        PyErr_SetString(PyExc_TypeError, "out must be uint16 (bfloat16 bits)");
    else if (!same_shape(&a.view, &b.view) || !same_shape(&a.view, &o.view))
        PyErr_SetString(PyExc_ValueError, "a, b and out must have one shape");
    else {
        Py_ssize_t n = 1;
        for (int i = 0; i < a.view.ndim; i++)
            n *= a.view.shape[i];
        /* the GIL is kept: a tile is ~100k elements, and handing the GIL back and forth costs
         * more than that on a loaded machine */
        if (n > 0 && a.view.ndim == 0)
            row(opc, a.view.buf, 0, a.is_bf16, b.view.buf, 0, b.is_bf16, o.view.buf, 0, 1);
        else if (n > 0)
            walk(opc, 0, a.view.ndim, a.view.shape, a.view.buf, a.view.strides, a.is_bf16,
                 b.view.buf, b.view.strides, b.is_bf16, o.view.buf, o.view.strides);
        ret = Py_None;
        Py_INCREF(ret);
    }
    PyBuffer_Release(&a.view);
    PyBuffer_Release(&b.view);
    PyBuffer_Release(&o.view);
    return ret;
}

CLONES static void cast_row(const float *src, uint16_t *o, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        o[i] = bf16_rne(src[i]);
}

static void walk_cast(int dim, int ndim, const Py_ssize_t *shape, const char *ps,
                      const Py_ssize_t *ss, char *po, const Py_ssize_t *so) {
    if (dim == ndim - 1) {
        Py_ssize_t n = shape[dim], s = ss[dim], t = so[dim];
        if (s == 4 && t == 2) {
            cast_row((const float *)ps, (uint16_t *)po, n);
            return;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, ps + i * s, 4);
            uint16_t h = bf16_rne(f);
            memcpy(po + i * t, &h, 2);
        }
        return;
    }
    for (Py_ssize_t i = 0; i < shape[dim]; i++)
        walk_cast(dim + 1, ndim, shape, ps + i * ss[dim], ss, po + i * so[dim], so);
}

static PyObject *py_f32_to_bf16(PyObject *self, PyObject *args) {
    PyObject *os_, *oo;
    if (!PyArg_ParseTuple(args, "OO", &os_, &oo))
        return NULL;
    operand s, o;
    if (get_operand(os_, &s, 0, "src") < 0)
        return NULL;
    if (get_operand(oo, &o, 1, "out") < 0) {
        PyBuffer_Release(&s.view);
        return NULL;
    }
    PyObject *ret = NULL;
    if (s.is_bf16 || !o.is_bf16)
        PyErr_SetString(PyExc_TypeError, "src must be float32 and out uint16 (bfloat16 bits)");
    else if (!same_shape(&s.view, &o.view))
        PyErr_SetString(PyExc_ValueError, "src and out must have one shape");
    else {
        Py_ssize_t n = 1;
        for (int i = 0; i < s.view.ndim; i++)
            n *= s.view.shape[i];
        if (n > 0) {
            if (s.view.ndim == 0) {
                float f;
                memcpy(&f, s.view.buf, 4);
                uint16_t h = bf16_rne(f);
                memcpy(o.view.buf, &h, 2);
            } else
                walk_cast(0, s.view.ndim, s.view.shape, s.view.buf, s.view.strides, o.view.buf,
                          o.view.strides);
        }
        ret = Py_None;
        Py_INCREF(ret);
    }
    PyBuffer_Release(&s.view);
    PyBuffer_Release(&o.view);
    return ret;
}

/* subscript.py _view_key: a subscript of Python ints and slices of int/None bounds as a hashable
 * tuple (ints as they are, slices as (start, stop, step)), else None; exact type checks, so True
 * (a bool) never stands for 1 */
static int plain_bound(PyObject *o) { return o == Py_None || PyLong_CheckExact(o); }

static PyObject *py_view_key(PyObject *self, PyObject *key) {
    int is_tuple = PyTuple_CheckExact(key);
    Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(key) : 1;
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = is_tuple ? PyTuple_GET_ITEM(key, i) : key;
        if (PyLong_CheckExact(k)) {
            Py_INCREF(k);
            PyTuple_SET_ITEM(out, i, k);
        } else if (Py_TYPE(k) == &PySlice_Type) {
            PySliceObject *sl = (PySliceObject *)k;
            if (!plain_bound(sl->start) || !plain_bound(sl->stop) || !plain_bound(sl->step)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            PyObject *t = PyTuple_Pack(3, sl->start, sl->stop, sl->step);
            if (t == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, i, t);
        } else {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
    }
    return out;
}

/* cblas_sgemm of numpy's BLAS (fastpath.py finds it); ILP64 builds take 64-bit sizes */
typedef void (*sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                          const float *, int64_t, float, float *, int64_t);
typedef void (*sgemm32_t)(int, int, int, int, int, int, float, const float *, int, const float *,
                          int, float, float *, int);
static void *sgemm_fn = NULL;
static int sgemm_ilp64 = 1;

static PyObject *py_set_sgemm(PyObject *self, PyObject *args) {
    unsigned long long addr;
    int ilp64;
    if (!PyArg_ParseTuple(args, "Kp", &addr, &ilp64))
        return NULL;
    sgemm_fn = (void *)(uintptr_t)addr;
    sgemm_ilp64 = ilp64;
    Py_RETURN_NONE;
}

/* a 2-D fp32 buffer whose rows are contiguous (BLAS-compatible as numpy's matmul requires);
 * returns its leading dimension in elements, or 0 (and the buffer released) when it is not one */
static Py_ssize_t blas_2d(PyObject *o, Py_buffer *v, int writable) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, v, flags) < 0) {
        PyErr_Clear(); /* not a fit: the caller takes the numpy path */
        return 0;
    }
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    Py_ssize_t ld = v->ndim == 2 ? v->strides[0] / 4 : 0;
    if (strcmp(f, "f") != 0 || v->itemsize != 4 || v->ndim != 2 || v->strides[1] != 4 ||
        v->strides[0] % 4 != 0 || ld < v->shape[1] || ld < 1 || v->shape[0] < 1 ||
        v->shape[1] < 1 || v->shape[0] > INT32_MAX || v->shape[1] > INT32_MAX ||
        ld > INT32_MAX || ((uintptr_t)v->buf) % 4 != 0) {
        PyBuffer_Release(v);
        return 0;
    }
    return ld;
}

static int overlaps(const Py_buffer *x, const Py_buffer *y) {
    const char *x0 = x->buf, *y0 = y->buf;
    const char *x1 = x0 + (x->shape[0] - 1) * x->strides[0] + x->shape[1] * 4;
    const char *y1 = y0 + (y->shape[0] - 1) * y->strides[0] + y->shape[1] * 4;
    return x0 < y1 && y0 < x1;
}

/* any NaN among the rows x cols fp32 values at row pitch ld (in elements)?  Branch-free per row
 * (the compiler vectorizes it); the scan also brings c into cache for the gemm */
static int has_nan(const float *c, Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t ld) {
    for (Py_ssize_t i = 0; i < rows; i++) {
        const uint32_t *r = (const uint32_t *)(c + i * ld);
        uint32_t any = 0;
        for (Py_ssize_t j = 0; j < cols; j++)
            any |= (uint32_t)((r[j] & 0x7fffffffu) > 0x7f800000u);
        if (any)
            return 1;
    }
    return 0;
}

/* one c += a.T @ b: raw pointers, sizes and leading dims (elements), valid while the caller
 * (or the queue's Python side) holds the arrays */
typedef struct {
    float *c;
    const float *a, *b;
    Py_ssize_t M, N, K, lda, ldb, ldc;
} gemm_task;

/* c, a, b as a task when gemm_acc applies to them (shapes, no overlap, M > 1, N > 1, distinct a
 * and b); 0 otherwise, with no Python error set (the caller takes the numpy path).  numpy's
 * matmul calls sgemm only for matrix x matrix (a vector goes to gemv/dot) and a product of an
 * operand with itself to syrk: those stay on the numpy path */
static int gemm_task_of(PyObject *oc, PyObject *oa, PyObject *ob, gemm_task *t) {
    Py_buffer c, a, b;
    Py_ssize_t ldc = blas_2d(oc, &c, 1);
    if (!ldc)
        return 0;
    Py_ssize_t lda = blas_2d(oa, &a, 0);
    if (!lda) {
        PyBuffer_Release(&c);
        return 0;
    }
    Py_ssize_t ldb = blas_2d(ob, &b, 0);
    if (!ldb) {
        PyBuffer_Release(&c);
        PyBuffer_Release(&a);
        return 0;
    }
    Py_ssize_t K = a.shape[0], M = a.shape[1], N = b.shape[1];
    int ok = b.shape[0] == K && c.shape[0] == M && c.shape[1] == N && M > 1 && N > 1 &&
             a.buf != b.buf && !overlaps(&c, &a) && !overlaps(&c, &b);
    if (ok) {
        t->c = c.buf;
        t->a = a.buf;
        t->b = b.buf;
        t->M = M, t->N = N, t->K = K, t->lda = lda, t->ldb = ldb, t->ldc = ldc;
    }
    PyBuffer_Release(&c);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return ok;
}

/* the BLAS call itself; needs no GIL */
static void run_task(const gemm_task *t) {
    /* CblasRowMajor = 101, CblasTrans = 112, CblasNoTrans = 111, as numpy passes them */
    if (sgemm_ilp64)
        ((sgemm64_t)sgemm_fn)(101, 112, 111, t->M, t->N, t->K, 1.0f, t->a, t->lda, t->b, t->ldb,
                              1.0f, t->c, t->ldc);
    else
        ((sgemm32_t)sgemm_fn)(101, 112, 111, (int)t->M, (int)t->N, (int)t->K, 1.0f, t->a,
                              (int)t->lda, t->b, (int)t->ldb, 1.0f, t->c, (int)t->ldc);
}

static PyObject *py_gemm_acc(PyObject *self, PyObject *args) {
    PyObject *oc, *oa, *ob;
    if (!PyArg_ParseTuple(args, "OOO", &oc, &oa, &ob))
        return NULL;
    gemm_task t;
    /* A NaN already in c stays on the numpy path: NaN + NaN keeps the first operand's NaN on
     * x86, and np.add(c, p) puts c first where the gemm kernel puts the product first (all
     * other values add alike) */
    if (sgemm_fn == NULL || !gemm_task_of(oc, oa, ob, &t) || has_nan(t.c, t.M, t.N, t.ldc))
        Py_RETURN_FALSE;
    Py_BEGIN_ALLOW_THREADS
    run_task(&t);
    Py_END_ALLOW_THREADS
    Py_RETURN_TRUE;
}

#include "_fastpath_queue.h"

static PyMethodDef methods[] = {
    {"set_sgemm", py_set_sgemm, METH_VARARGS,
     "set_sgemm(address, ilp64): the cblas_sgemm gemm_acc calls (numpy's)"},
    {"gemm_acc", py_gemm_acc, METH_VARARGS,
     "gemm_acc(c, a, b) -> bool: c += a.T @ b through cblas_sgemm (beta 1); False: not done"},
    QUEUE_METHODS
    {"view_key", py_view_key, METH_O, "view_key(key) -> hashable tuple or None (subscript.py)"},
    {"binary_to_bf16", py_binary_to_bf16, METH_VARARGS,
     "binary_to_bf16(op, a, b, out): out = bf16_rne(f32(a) op f32(b)); op 0 add 1 sub 2 mul"},
    {"f32_to_bf16", py_f32_to_bf16, METH_VARARGS, "f32_to_bf16(src, out): out = bf16_rne(src)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_fastpath",
                                       "Hot numeric kernels of the functional core.", -1, methods,
                                       NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastpath(void) { return PyModule_Create(&moduledef); }
