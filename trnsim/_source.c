/* source.py's user_loc in C: the innermost stack frame outside trnsim, as an interned SourceLoc.
 * Every traced instruction asks for it, so the walk up the stack is worth doing without a Python
 * step per frame.  The caches and the rules stay source.py's own (handed over by ``setup``):
 *
 *   setup(internal_cache, is_internal, loc_cache, SourceLoc, unknown)
 *   user_loc(depth=2)   as source.user_loc: depth counts from user_loc's own frame (0), so the
 *                       walk starts ``depth - 1`` frames above the caller of this function
 *
 * internal_cache: file name -> bool (filled by calling is_internal(code) on a miss);
 * loc_cache: (file name, code, line) -> SourceLoc (a miss builds SourceLoc(file, line, name)).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static PyObject *internal_cache, *is_internal, *loc_cache, *loc_type, *unknown;

static PyObject *py_setup(PyObject *self, PyObject *args) {
    PyObject *a, *b, *c, *d, *e;
    if (!PyArg_ParseTuple(args, "O!OO!OO", &PyDict_Type, &a, &b, &PyDict_Type, &c, &d, &e))
        return NULL;
    Py_INCREF(a), Py_INCREF(b), Py_INCREF(c), Py_INCREF(d), Py_INCREF(e);
    Py_XSETREF(internal_cache, a);
    Py_XSETREF(is_internal, b);
    Py_XSETREF(loc_cache, c);
    Py_XSETREF(loc_type, d);
    Py_XSETREF(unknown, e);
    Py_RETURN_NONE;
}

/* 1 internal, 0 not, -1 error */
static int internal(PyCodeObject *code) {
    PyObject *fn = code->co_filename;
    PyObject *r = PyDict_GetItemWithError(internal_cache, fn);
    if (r == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *got = PyObject_CallOneArg(is_internal, (PyObject *)code);
        if (!got)
            return -1;
        int t = PyObject_IsTrue(got);
        Py_DECREF(got);
        return t;
    }
    return PyObject_IsTrue(r);
}

/* source.frame_loc for a frame that is not None */
static PyObject *frame_loc(PyFrameObject *f) {
    PyCodeObject *code = PyFrame_GetCode(f);
    int line = PyFrame_GetLineNumber(f);
    PyObject *lineno = PyLong_FromLong(line);
    PyObject *key = lineno ? PyTuple_Pack(3, code->co_filename, (PyObject *)code, lineno) : NULL;
    PyObject *loc = NULL;
    if (key) {
        loc = PyDict_GetItemWithError(loc_cache, key);
        if (loc) {
            Py_INCREF(loc);
        } else if (!PyErr_Occurred()) {
            loc = PyObject_CallFunctionObjArgs(loc_type, code->co_filename, lineno, code->co_name,
                                               NULL);
            if (loc && PyDict_SetItem(loc_cache, key, loc) < 0)
                Py_CLEAR(loc);
        }
    }
    Py_XDECREF(key);
    Py_XDECREF(lineno);
    Py_DECREF(code);
    return loc;
}

static PyObject *py_user_loc(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long depth = 2;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "user_loc takes at most one argument");
        return NULL;
    }
    if (nargs == 1) {
        depth = PyLong_AsLong(args[0]);
        if (depth == -1 && PyErr_Occurred())
            return NULL;
    }
    if (!internal_cache) {
        PyErr_SetString(PyExc_RuntimeError, "trnsim._source.setup was not called");
        return NULL;
    }
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed: the caller's frame, user_loc's frame 1 */
    Py_XINCREF(f);
    for (long i = 1; i < depth && f; i++) {
        PyFrameObject *b = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = b;
    }
    if (!f || depth < 1) {
        Py_XDECREF(f);
        PyErr_SetString(PyExc_ValueError, "call stack is not deep enough");
        return NULL;
    }
    while (f) {
        PyCodeObject *code = PyFrame_GetCode(f);
        int r = internal(code);
        Py_DECREF(code);
        if (r < 0) {
            Py_DECREF(f);
            return NULL;
        }
        if (!r)
            break;
        PyFrameObject *b = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = b;
    }
    if (!f) {
        Py_INCREF(unknown);
        return unknown;
    }
    PyObject *loc = frame_loc(f);
    Py_DECREF(f);
    return loc;
}

static PyMethodDef methods[] = {
    {"setup", py_setup, METH_VARARGS,
     "setup(internal_cache, is_internal, loc_cache, SourceLoc, unknown): source.py's caches"},
    {"user_loc", (PyCFunction)(void (*)(void))py_user_loc, METH_FASTCALL,
     "user_loc(depth=2) -> SourceLoc: the innermost frame outside trnsim (source.user_loc)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_source",
                                       "source.py's user_loc in C.", -1, methods, NULL, NULL,
                                       NULL, NULL};

PyMODINIT_FUNC PyInit__source(void) { return PyModule_Create(&moduledef); }
