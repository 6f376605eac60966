/* Loop-block kernels of the instruction trace, each the exact counterpart of a Python reference
 * that stays in place (trnsim/ir/loops.py selects between them):
 *
 *   pack(template, deltas)          a block's per-region moves as one buffer (read by materialize)
 *   materialize(packed, template, k0, nlocal, synth_first, first_index, lo, hi, Region, Instruction)
 *                                   records lo .. hi of a LoopBlock as a list (LoopBlock.materialize)
 *   plan(seg0, seg1, seg2, sids, synths)
 *                                   per-region deltas and local-tile count of three recorded loop
 *                                   iterations, or None when they are not regular (fastforward._plan)
 *   predicts(template, deltas, k, seg, sid, synth)
 *                                   is seg the template moved k steps? (fastforward._predicts)
 *
 * Records are NamedTuples read by field position: Instruction (index 0, engine 1, opcode 2, reads 3,
 * writes 4, partitions 5 .. core 11) and Region (memory 0, tensor 1, name 2, partition 3,
 * partitions 4, start 5, stop 6, elements 7, dtype 8, contiguous 9, indirect 10).  Anything else
 * (other record lengths, integers beyond 64 bits) raises ValueError and the caller uses the
 * Python reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define INS_FIELDS 12
#define REG_FIELDS 11

static PyObject *unsupported(void) {
    PyErr_SetString(PyExc_ValueError, "records the C loop kernels do not handle");
    return NULL;
}

static int get_ll(PyObject *o, long long *out) {
    int overflow = 0;
    if (!PyLong_Check(o)) {
        unsupported();
        return -1;
    }
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
        unsupported();
        return -1;
    }
    if (*out == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

static int is_ins(PyObject *o) { return PyTuple_Check(o) && PyTuple_GET_SIZE(o) == INS_FIELDS; }
static int is_reg(PyObject *o) { return PyTuple_Check(o) && PyTuple_GET_SIZE(o) == REG_FIELDS; }

static int checked_ins(PyObject *ins) {
    if (!is_ins(ins) || !PyTuple_Check(PyTuple_GET_ITEM(ins, 3)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(ins, 4))) {
        unsupported();
        return 0;
    }
    return 1;
}

static PyObject *reg_at(PyObject *ins, Py_ssize_t i, Py_ssize_t nr) {
    return i < nr ? PyTuple_GET_ITEM(PyTuple_GET_ITEM(ins, 3), i)
                  : PyTuple_GET_ITEM(PyTuple_GET_ITEM(ins, 4), i - nr);
}

/* ---- untrack ------------------------------------------------------------------------------ */

/* Take a record out of the cyclic collector's lists when nothing it holds can be part of a
 * cycle: a tuple (or a tuple subclass without instance dicts, i.e. a NamedTuple) whose items are
 * all atoms or such tuples themselves, untracked first (``depth`` levels down).  The collector
 * does the same to plain tuples on its first pass, but never to NamedTuples: a trace's records
 * would be walked again at every collection while they live.  1: untracked (or never tracked). */
static int untrack(PyObject *o, int depth) {
    if (!PyObject_IS_GC(o) || !PyObject_GC_IsTracked(o))
        return 1;
    if (depth == 0 || !PyTuple_Check(o) || Py_TYPE(o)->tp_dictoffset != 0)
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!untrack(PyTuple_GET_ITEM(o, i), depth - 1))
            return 0;
    PyObject_GC_UnTrack(o);
    return 1;
}

static PyObject *py_untrack(PyObject *self, PyObject *o) {
    return PyBool_FromLong(untrack(o, 3));
}

/* ---- pack / materialize ------------------------------------------------------------------ */
/* packed: int64 [L + 1 offsets (in entries)] then per region 5 x int64 (dp, ds, de, rank, moves) */

static PyObject *py_pack(PyObject *self, PyObject *args) {
    PyObject *template, *deltas;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &template, &PyTuple_Type, &deltas))
        return NULL;
    Py_ssize_t L = PyTuple_GET_SIZE(template), total = 0;
    if (PyTuple_GET_SIZE(deltas) != L)
        return unsupported();
    for (Py_ssize_t j = 0; j < L; j++) {
        PyObject *ins = PyTuple_GET_ITEM(template, j), *d = PyTuple_GET_ITEM(deltas, j);
        if (!checked_ins(ins))
            return NULL;
        Py_ssize_t nreg = PyTuple_GET_SIZE(PyTuple_GET_ITEM(ins, 3)) +
                          PyTuple_GET_SIZE(PyTuple_GET_ITEM(ins, 4));
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != nreg)
            return unsupported();
        total += nreg;
    }
    PyObject *buf = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * (L + 1 + 5 * total));
    if (!buf)
        return NULL;
    int64_t *p = (int64_t *)PyBytes_AS_STRING(buf), *e = p + L + 1;
    Py_ssize_t at = 0;
    for (Py_ssize_t j = 0; j < L; j++) {
        PyObject *ins = PyTuple_GET_ITEM(template, j), *d = PyTuple_GET_ITEM(deltas, j);
        Py_ssize_t nr = PyTuple_GET_SIZE(PyTuple_GET_ITEM(ins, 3)), nreg = PyTuple_GET_SIZE(d);
        p[j] = at;
        for (Py_ssize_t i = 0; i < nreg; i++, at++) {
            PyObject *di = PyTuple_GET_ITEM(d, i);
            long long v[4];
            if (!is_reg(reg_at(ins, i, nr)) || !PyTuple_Check(di) || PyTuple_GET_SIZE(di) != 4) {
                Py_DECREF(buf);
                return unsupported();
            }
            for (int f = 0; f < 4; f++)
                if (get_ll(PyTuple_GET_ITEM(di, f), &v[f]) < 0) {
                    Py_DECREF(buf);
                    return NULL;
                }
            int64_t *q = e + 5 * at;
            q[0] = v[0], q[1] = v[1], q[2] = v[2], q[3] = v[3];
            q[4] = v[3] >= 0 || v[0] || v[1] || v[2];
        }
    }
    p[L] = at;
    return buf;
}

/* a Region moved by k steps (tensor replaced by the iteration's local id when rank >= 0) */
static PyObject *moved_region(PyTypeObject *rt, PyObject *r, const int64_t *q, long long k,
                              long long local) {
    long long f[4];
    for (int i = 0; i < 4; i++) {
        static const int pos[4] = {3, 5, 6, 1};
        if (get_ll(PyTuple_GET_ITEM(r, pos[i]), &f[i]) < 0)
            return NULL;
    }
    PyObject *part = PyLong_FromLongLong(f[0] + k * q[0]);
    PyObject *start = PyLong_FromLongLong(f[1] + k * q[1]);
    PyObject *stop = PyLong_FromLongLong(f[2] + k * q[2]);
    PyObject *tensor = q[3] < 0 ? (Py_INCREF(PyTuple_GET_ITEM(r, 1)), PyTuple_GET_ITEM(r, 1))
                                : PyLong_FromLongLong(local - q[3]);
    PyObject *out = (part && start && stop && tensor) ? rt->tp_alloc(rt, REG_FIELDS) : NULL;
    if (!out) {
        Py_XDECREF(part), Py_XDECREF(start), Py_XDECREF(stop), Py_XDECREF(tensor);
        return NULL;
    }
    for (int i = 0; i < REG_FIELDS; i++) {
        PyObject *v;
        switch (i) {
        case 1: v = tensor; break;
        case 3: v = part; break;
        case 5: v = start; break;
        case 6: v = stop; break;
        default: v = PyTuple_GET_ITEM(r, i); Py_INCREF(v);
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *build_regs(PyTypeObject *rt, PyObject *src, const int64_t *q, Py_ssize_t off,
                            long long k, long long local) {
    Py_ssize_t n = PyTuple_GET_SIZE(src);
    PyObject *out = PyTuple_New(n);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyTuple_GET_ITEM(src, i);
        const int64_t *qi = q + 5 * (off + i);
        PyObject *v = qi[4] ? moved_region(rt, r, qi, k, local) : (Py_INCREF(r), r);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *py_materialize(PyObject *self, PyObject *args) {
    PyObject *packed, *template;
    long long k0, nlocal, synth_first, first_index;
    Py_ssize_t lo, hi;
    PyTypeObject *rt, *it;
    if (!PyArg_ParseTuple(args, "O!O!LLLLnnO!O!", &PyBytes_Type, &packed, &PyTuple_Type, &template,
                          &k0, &nlocal, &synth_first, &first_index, &lo, &hi, &PyType_Type, &rt,
                          &PyType_Type, &it))
        return NULL;
    Py_ssize_t L = PyTuple_GET_SIZE(template);
    if (!PyType_IsSubtype(rt, &PyTuple_Type) || !PyType_IsSubtype(it, &PyTuple_Type) || L == 0 ||
        lo < 0 || hi < lo)
        return unsupported();
    const int64_t *offs = (const int64_t *)PyBytes_AS_STRING(packed), *ents = offs + L + 1;
    if (PyBytes_GET_SIZE(packed) != (Py_ssize_t)sizeof(int64_t) * (L + 1 + 5 * offs[L]))
        return unsupported();
    PyObject *out = PyList_New(hi - lo);
    if (!out)
        return NULL;
    Py_ssize_t c = lo / L, j = lo % L;
    long long k = k0 + c, local = -(synth_first + c * nlocal);
    for (Py_ssize_t pos = lo; pos < hi; pos++) {
        PyObject *ins = PyTuple_GET_ITEM(template, j);
        if (!is_ins(ins))
            goto fail;
        PyObject *rd = PyTuple_GET_ITEM(ins, 3), *wr = PyTuple_GET_ITEM(ins, 4);
        Py_ssize_t nr = PyTuple_GET_SIZE(rd), o = offs[j];
        int moves = 0;
        for (Py_ssize_t i = o; i < offs[j + 1]; i++)
            moves |= (int)ents[5 * i + 4];
        PyObject *reads, *writes;
        if (moves) {
            reads = build_regs(rt, rd, ents, o, k, local);
            writes = reads ? build_regs(rt, wr, ents, o + nr, k, local) : NULL;
        } else {
            Py_INCREF(rd), Py_INCREF(wr);
            reads = rd, writes = wr;
        }
        PyObject *index = writes ? PyLong_FromLongLong(first_index + pos) : NULL;
        PyObject *rec = index ? it->tp_alloc(it, INS_FIELDS) : NULL;
        if (!rec) {
            Py_XDECREF(reads), Py_XDECREF(writes), Py_XDECREF(index);
            goto fail;
        }
        PyTuple_SET_ITEM(rec, 0, index);
        PyTuple_SET_ITEM(rec, 3, reads);
        PyTuple_SET_ITEM(rec, 4, writes);
        for (int f = 1; f < INS_FIELDS; f++) {
            if (f == 3 || f == 4)
                continue;
            PyObject *v = PyTuple_GET_ITEM(ins, f);
            Py_INCREF(v);
            PyTuple_SET_ITEM(rec, f, v);
        }
        untrack(rec, 3);
        PyList_SET_ITEM(out, pos - lo, rec);
        if (++j == L) {
            j = 0;
            k++;
            local -= nlocal;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return PyErr_Occurred() ? NULL : unsupported();
}

/* ---- plan / predicts --------------------------------------------------------------------- */

/* fastforward._same_shape: engine, opcode, fields 5..11, number of reads and writes; 1 same,
 * 0 differ (a comparison raising ValueError/TypeError counts as differ), -1 error */
static int same_shape(PyObject *a, PyObject *b) {
    static const int fields[] = {1, 2, 5, 6, 7, 8, 9, 10, 11};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(a, fields[i]),
                                          PyTuple_GET_ITEM(b, fields[i]), Py_EQ);
        if (eq < 0) {
            if (PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                return 0;
            }
            return -1;
        }
        if (!eq)
            return 0;
    }
    return PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 3)) == PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, 3)) &&
           PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 4)) == PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, 4));
}

/* Region fields memory (0), partitions (4), elements .. indirect (7..10) equal: 1, 0, -1 error */
static int same_fixed(PyObject *x, PyObject *y) {
    static const int fields[] = {0, 4, 7, 8, 9, 10};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(x, fields[i]),
                                          PyTuple_GET_ITEM(y, fields[i]), Py_EQ);
        if (eq <= 0)
            return eq;
    }
    return 1;
}

/* partition (3), start (5), stop (6), tensor (1) of a region */
static int moving_fields(PyObject *r, long long f[4]) {
    return get_ll(PyTuple_GET_ITEM(r, 3), &f[0]) < 0 || get_ll(PyTuple_GET_ITEM(r, 5), &f[1]) < 0 ||
                   get_ll(PyTuple_GET_ITEM(r, 6), &f[2]) < 0 || get_ll(PyTuple_GET_ITEM(r, 1), &f[3]) < 0
               ? -1
               : 0;
}

static int is_local(long long t, long long sid, long long synth) {
    return t > 0 ? t > sid : -t >= synth;
}

/* rank of tensor t in dict r (its order of first use): the value, -1 error */
static long long rank_of(PyObject *r, PyObject *t) {
    PyObject *n = PyLong_FromSsize_t(PyDict_Size(r));
    if (!n)
        return -1;
    PyObject *got = PyDict_SetDefault(r, t, n);
    Py_DECREF(n);
    return got ? PyLong_AsLongLong(got) : -1;
}

static PyObject *tuple4(long long a, long long b, long long c, long long d) {
    return Py_BuildValue("(LLLL)", a, b, c, d);
}

/* one instruction triple of _plan: its delta tuple (new ref), Py_None (borrowed) if not regular,
 * NULL on error */
static PyObject *plan_one(PyObject *a, PyObject *b, PyObject *c, const long long *sid,
                          const long long *sy, PyObject **ranks) {
    int s = same_shape(a, b);
    if (s > 0)
        s = same_shape(b, c);
    if (s <= 0)
        return s < 0 ? NULL : Py_None;
    Py_ssize_t nr = PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 3));
    Py_ssize_t n = nr + PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 4));
    PyObject *d = PyTuple_New(n);
    if (!d)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = reg_at(a, i, nr), *y = reg_at(b, i, nr), *z = reg_at(c, i, nr);
        if (!is_reg(x) || !is_reg(y) || !is_reg(z))
            goto unsup;
        int eq = same_fixed(x, y);
        if (eq > 0)
            eq = same_fixed(y, z);
        if (eq < 0)
            goto err;
        if (!eq)
            goto irregular;
        long long fx[4], fy[4], fz[4];
        if (moving_fields(x, fx) < 0 || moving_fields(y, fy) < 0 || moving_fields(z, fz) < 0)
            goto err;
        long long dp = fy[0] - fx[0], ds = fy[1] - fx[1], de = fy[2] - fx[2], rank;
        if (fz[0] - fy[0] != dp || fz[1] - fy[1] != ds || fz[2] - fy[2] != de)
            goto irregular;
        int lx = is_local(fx[3], sid[0], sy[0]), ly = is_local(fy[3], sid[1], sy[1]),
            lz = is_local(fz[3], sid[2], sy[2]);
        if (!(lx || ly || lz)) {
            if (!(fx[3] == fy[3] && fy[3] == fz[3]))
                goto irregular;
            rank = -1;
        } else if (!(lx && ly && lz)) {
            goto irregular;
        } else {
            rank = rank_of(ranks[0], PyTuple_GET_ITEM(x, 1));
            if (rank < 0)
                goto err;
            long long r1 = rank_of(ranks[1], PyTuple_GET_ITEM(y, 1));
            if (r1 < 0)
                goto err;
            if (r1 != rank)
                goto irregular;
            long long r2 = rank_of(ranks[2], PyTuple_GET_ITEM(z, 1));
            if (r2 < 0)
                goto err;
            if (r2 != rank)
                goto irregular;
        }
        PyObject *t = tuple4(dp, ds, de, rank);
        if (!t)
            goto err;
        untrack(t, 1); /* integers only: the collector need not walk a block's deltas */
        PyTuple_SET_ITEM(d, i, t);
    }
    untrack(d, 1);
    return d;
irregular:
    Py_DECREF(d);
    return Py_None;
unsup:
    unsupported();
err:
    Py_DECREF(d);
    return NULL;
}

static PyObject *py_plan(PyObject *self, PyObject *args) {
    PyObject *segs[3];
    long long sid[3], sy[3];
    if (!PyArg_ParseTuple(args, "O!O!O!(LLL)(LLL)", &PyList_Type, &segs[0], &PyList_Type, &segs[1],
                          &PyList_Type, &segs[2], &sid[0], &sid[1], &sid[2], &sy[0], &sy[1], &sy[2]))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(segs[0]);
    if (PyList_GET_SIZE(segs[1]) < n || PyList_GET_SIZE(segs[2]) < n)
        n = PyList_GET_SIZE(segs[1]) < PyList_GET_SIZE(segs[2]) ? PyList_GET_SIZE(segs[1])
                                                                : PyList_GET_SIZE(segs[2]);
    PyObject *ranks[3] = {PyDict_New(), PyDict_New(), PyDict_New()};
    PyObject *deltas = PyList_New(0), *result = NULL;
    if (!ranks[0] || !ranks[1] || !ranks[2] || !deltas)
        goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *a = PyList_GET_ITEM(segs[0], j), *b = PyList_GET_ITEM(segs[1], j),
                 *c = PyList_GET_ITEM(segs[2], j);
        if (!checked_ins(a) || !checked_ins(b) || !checked_ins(c))
            goto done;
        PyObject *d = plan_one(a, b, c, sid, sy, ranks);
        if (!d)
            goto done;
        if (d == Py_None) {
            Py_INCREF(Py_None);
            result = Py_None;
            goto done;
        }
        int bad = PyList_Append(deltas, d);
        Py_DECREF(d);
        if (bad < 0)
            goto done;
    }
    result = Py_BuildValue("(On)", deltas, PyDict_Size(ranks[0]));
done:
    Py_XDECREF(ranks[0]), Py_XDECREF(ranks[1]), Py_XDECREF(ranks[2]), Py_XDECREF(deltas);
    return result;
}

static PyObject *py_predicts(PyObject *self, PyObject *args) {
    PyObject *template, *deltas, *seg;
    long long k, sid, synth;
    if (!PyArg_ParseTuple(args, "OOLOLL", &template, &deltas, &k, &seg, &sid, &synth))
        return NULL;
    PyObject *t = PySequence_Fast(template, "template"), *ds = NULL, *sg = NULL, *ranks = NULL;
    PyObject *result = NULL;
    if (!t || !(ds = PySequence_Fast(deltas, "deltas")) || !(sg = PySequence_Fast(seg, "seg")) ||
        !(ranks = PyDict_New()))
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(t);
    if (PySequence_Fast_GET_SIZE(sg) != n) {
        result = Py_False;
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(ds) < n)
        n = PySequence_Fast_GET_SIZE(ds);
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *a = PySequence_Fast_GET_ITEM(t, j), *b = PySequence_Fast_GET_ITEM(sg, j),
                 *d = PySequence_Fast_GET_ITEM(ds, j);
        if (!checked_ins(a) || !checked_ins(b))
            goto done;
        int s = same_shape(a, b);
        if (s < 0)
            goto done;
        if (!s) {
            result = Py_False;
            goto done;
        }
        Py_ssize_t nr = PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 3));
        Py_ssize_t nreg = nr + PyTuple_GET_SIZE(PyTuple_GET_ITEM(a, 4));
        if (!PyTuple_Check(d)) {
            unsupported();
            goto done;
        }
        if (PyTuple_GET_SIZE(d) < nreg)
            nreg = PyTuple_GET_SIZE(d);
        for (Py_ssize_t i = 0; i < nreg; i++) {
            PyObject *x = reg_at(a, i, nr), *y = reg_at(b, i, nr), *di = PyTuple_GET_ITEM(d, i);
            long long fx[4], fy[4], dv[4];
            if (!is_reg(x) || !is_reg(y) || !PyTuple_Check(di) || PyTuple_GET_SIZE(di) != 4) {
                unsupported();
                goto done;
            }
            for (int f = 0; f < 4; f++)
                if (get_ll(PyTuple_GET_ITEM(di, f), &dv[f]) < 0)
                    goto done;
            int eq = same_fixed(x, y);
            if (eq < 0 || moving_fields(x, fx) < 0 || moving_fields(y, fy) < 0)
                goto done;
            if (!eq || fy[0] != fx[0] + k * dv[0] || fy[1] != fx[1] + k * dv[1] ||
                fy[2] != fx[2] + k * dv[2]) {
                result = Py_False;
                goto done;
            }
            if (dv[3] < 0) {
                if (fy[3] != fx[3]) {
                    result = Py_False;
                    goto done;
                }
            } else {
                if (!is_local(fy[3], sid, synth)) {
                    result = Py_False;
                    goto done;
                }
                long long r = rank_of(ranks, PyTuple_GET_ITEM(y, 1));
                if (r < 0)
                    goto done;
                if (r != dv[3]) {
                    result = Py_False;
                    goto done;
                }
            }
        }
    }
    result = Py_True;
done:
    Py_XINCREF(result);
    Py_XDECREF(t), Py_XDECREF(ds), Py_XDECREF(sg), Py_XDECREF(ranks);
    return result;
}

static PyMethodDef methods[] = {
    {"untrack", py_untrack, METH_O,
     "untrack(record) -> bool: out of the cyclic collector when it can hold no cycle"},
    {"pack", py_pack, METH_VARARGS, "pack(template, deltas) -> bytes: a block's region moves"},
    {"materialize", py_materialize, METH_VARARGS,
     "materialize(packed, template, k0, nlocal, synth_first, first_index, lo, hi, Region, "
     "Instruction) -> list of records lo .. hi"},
    {"plan", py_plan, METH_VARARGS,
     "plan(seg0, seg1, seg2, sids, synths) -> (deltas, nlocal) or None"},
    {"predicts", py_predicts, METH_VARARGS,
     "predicts(template, deltas, k, seg, sid, synth) -> bool"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_loops",
                                       "Loop-block kernels of the instruction trace.", -1, methods,
                                       NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__loops(void) { return PyModule_Create(&moduledef); }
