/* Native dependency analysis and list scheduling for trnsim's timing model.
 *
 * Three functions, each the exact counterpart of Python code that stays the reference:
 *   encode        one pass over a trace's NamedTuple records -> shape ids and region geometry
 *                 (encode.py: encode_py)
 *   dependencies  RAW / WAR / WAW on bucketed byte ranges (deps.py)
 *   schedule      in-order or window-reordered engines, DMA queues, PE throttle, v2 shared
 *                 ports (scheduler.py and its rule objects in rules.py, on des/)
 * One translation unit: the parts live in _native_util.h, _native_encode.h, _native_deps.h,
 * _native_gaps.h, _native_assign.h, _native_place.h and _native_schedule.h, included below.
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

#include "_native_util.h"
#include "_native_encode.h"
#include "_native_deps.h"
#include "_native_gaps.h"
#include "_native_assign.h"
#include "_native_place.h"
#include "_native_schedule.h"

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
