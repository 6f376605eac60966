"""The functional core's C fast path (``_fastpath.c``), when built, and its numpy reference.

``pip install -e .`` compiles the extension as optional; without a compiler every caller keeps the
pure numpy expression, which the C code matches bit for bit (tests/nki/test_fastpath_*.py).
``TRNSIM_FASTPATH=0`` (read at import) or ``set_enabled(False)`` forces the reference path
everywhere: the numpy expressions, no product-buffer reuse, the general ``emit`` of matmul results.
The switch is a module flag, not an environment lookup per call: the matmul path reads it per
instruction.

``gemm_submit`` queues the PSUM accumulation ``c += a.T @ b`` for the C worker thread
(``_fastpath_queue.h``), so the BLAS call overlaps the interpreter's bookkeeping of the next
instructions (one sgemm call per task, as ``gemm_acc`` makes it: numpy's BLAS sums a product
split into blocks, or run on another thread count, in another order).  ``QUEUED`` says work is
pending; every read of PSUM values other than the hot path's own calls ``drain()`` first (``NkiTensor.array``, ``read_f32``, the accumulation's other
branches, kernel end in harness.py, ``os.fork``, exit).  ``TRNSIM_ASYNC_GEMM=0`` (or
``set_async(False)``) keeps the synchronous ``gemm_acc``; ``=1`` forces the queue on; unset, it
is on where a core is left beside numpy's BLAS threads (``_spare_core``).
"""
from __future__ import annotations

import atexit
import os
import threading
from collections import deque
from typing import Optional

import numpy as np

from . import dtypes as dt

try:
    from . import _fastpath as _mod
except ImportError:  # not built (no compiler at install time)
    _mod = None

_OPS = {"add": 0, "subtract": 1, "multiply": 2}
_F32 = dt.float32
_BF16 = dt.bfloat16
_U16 = np.dtype(np.uint16)
_OFF = ("0", "false", "off", "no")


ON = os.environ.get("TRNSIM_FASTPATH", "").strip().lower() not in _OFF
_ON = ("1", "true", "on", "yes")
_ASYNC_ENV = os.environ.get("TRNSIM_ASYNC_GEMM", "").strip().lower()
ASYNC = _ASYNC_ENV not in _OFF
# unset (auto): the queue is used only where a core is left beside numpy's BLAS threads
# (_spare_core), decided at the first gemm_ready; "1" forces it on, "0" off
_async_auto = ASYNC and _ASYNC_ENV not in _ON


def set_enabled(on: bool) -> bool:
    """Switch the fast paths on or off (tests compare both); returns the previous setting."""
    global ON
    drain()
    was, ON = ON, bool(on)
    if not ON:
        product_buffers.clear()
    return was


def set_async(on: bool) -> bool:
    """Switch the queued (overlapped) PSUM accumulation on or off; returns the previous
    setting."""
    global ASYNC, _async_auto
    drain()
    was, ASYNC = ASYNC, bool(on)
    _async_auto = False
    return was


def module():
    """The extension module, or None when it is not built or the fast paths are off."""
    return _mod if ON else None


def available() -> bool:
    """True when the C fast path is built and not switched off."""
    return module() is not None


def _bits(a: np.ndarray) -> Optional[np.ndarray]:
    """``a`` as the C code reads it: fp32 as is, bfloat16 as its uint16 bits; None otherwise."""
    d = a.dtype
    if d == _F32:
        return a
    if d == _BF16:
        return a.view(_U16)
    return None


def binary_to_bf16(name: str, a: np.ndarray, b: np.ndarray) -> Optional[np.ndarray]:
    """``bf16(f32(a) <name> f32(b))`` (round to nearest even) for add/subtract/multiply on
    same-shaped fp32/bf16 arrays, in one pass; None when the C path does not apply."""
    m = module()
    opc = _OPS.get(name)
    if m is None or opc is None or a.shape != b.shape or a.ndim == 0:
        return None
    xa, xb = _bits(a), _bits(b)
    if xa is None or xb is None:
        return None
    out = np.empty(a.shape, _BF16)
    m.binary_to_bf16(opc, xa, xb, out.view(_U16))
    return out


def binary_into_ok(name: str, a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``binary_into`` applies: the C path on, add/subtract/multiply, same-shaped
    fp32/bf16 arrays."""
    return _mod is not None and ON and name in _OPS and a.shape == b.shape and a.ndim > 0 and \
        _bits(a) is not None and _bits(b) is not None


def binary_into(name: str, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = bf16(f32(a) <name> f32(b))`` (binary_to_bf16's bits) written straight into
    the bf16 array ``out``, which may be ``a`` or ``b`` element for element (check
    ``binary_into_ok`` first)."""
    _mod.binary_to_bf16(_OPS[name], _bits(a), _bits(b), out.view(_U16))


# numpy's own BLAS (the library its matmul calls): cblas_sgemm with beta = 1 adds a product into
# PSUM in the call numpy makes with beta = 0, so the sum is the same; any other BLAS (scipy's, a
# system one) might order the K products differently, so only numpy's is used.  ILP64 wheels
# (numpy >= 2) suffix their symbols "64_"; found once, checked bit for bit once (_gemm_ok).
_SGEMM_SYMBOLS = (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True))
_gemm_state = None  # None: not looked up yet; then True (usable) or False


def _numpy_blas_libs() -> list:
    """Paths of the OpenBLAS libraries bundled with numpy's wheel (Linux and macOS layouts)."""
    import glob
    root = os.path.dirname(np.__file__)
    pats = (os.path.join(root, os.pardir, "numpy.libs", "*openblas*"),
            os.path.join(root, ".dylibs", "*openblas*"))
    return sorted(p for pat in pats for p in glob.glob(pat))


def _find(names) -> Optional[int]:
    """The address of the first of ``names`` exported by numpy's OpenBLAS, or None."""
    import ctypes
    for path in _numpy_blas_libs():
        try:
            lib = ctypes.CDLL(path)  # already loaded by numpy: the same handle, no second copy
        except OSError:
            continue
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                return ctypes.cast(fn, ctypes.c_void_p).value
    return None


def _find_sgemm():
    """(address, ilp64) of numpy's cblas_sgemm, or None where it cannot be found."""
    for name, ilp64 in _SGEMM_SYMBOLS:
        addr = _find((name,))
        if addr is not None:
            return addr, ilp64
    return None


def _gemm_ok(m) -> bool:
    """Hand numpy's sgemm to the C code and check it against ``np.matmul`` + ``np.add`` on
    random data, bit for bit; False (numpy path only) on any difference."""
    found = _find_sgemm()
    if found is None:
        return False
    m.set_sgemm(*found)
    rng = np.random.default_rng(12345)
    for K, M, N in ((128, 128, 512), (64, 96, 200), (3, 17, 5)):
        a = rng.standard_normal((K, M + 3), dtype=np.float32)[:, 1:M + 1]
        b = rng.standard_normal((K, N), dtype=np.float32)
        c = rng.standard_normal((M, N), dtype=np.float32)
        ref = c + np.matmul(a.T, b)
        if not m.gemm_acc(c, a, b) or not np.array_equal(c.view(np.uint32), ref.view(np.uint32)):
            m.set_sgemm(0, True)
            return False
    return True


_GET_THREADS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                "openblas_get_num_threads")


def _spare_core() -> bool:
    """True when this process may run on more cores than numpy's BLAS uses threads: only then
    does the worker's BLAS call overlap the interpreter instead of taking a core from it (each
    call runs on every BLAS thread, and its bits depend on how many, so it cannot be made
    single-threaded for the worker's sake)."""
    import ctypes
    get = _find(_GET_THREADS)
    if get is None:
        return False
    threads = ctypes.CFUNCTYPE(ctypes.c_int)(get)()
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return cpus > threads


def gemm_ready() -> bool:
    """True when gemm_acc can run (C path built and on, numpy's sgemm found and checked)."""
    global _gemm_state, ASYNC, _async_auto
    if _gemm_state and ON:  # the per-instruction case: one test
        return True
    m = module()
    if m is None:
        return False
    if _gemm_state is None:
        _gemm_state = _gemm_ok(m)
        if _async_auto:
            ASYNC = _gemm_state and _spare_core()
            _async_auto = False
    return _gemm_state


def gemm_acc(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """``c += a.T @ b`` in place with one BLAS call, bit for bit ``np.add(c, np.matmul(a.T, b),
    out=c)``; False (``c`` untouched) when the C path does not apply to these arrays."""
    return gemm_ready() and _mod.gemm_acc(c, a, b)


# -- the gemm queue (_fastpath_queue.h): the Python side keeps each task's arrays alive ---------
QUEUED = False  # tasks submitted and not drained: the drain points test this flag first
_queue_lock = threading.Lock()  # LNC cores and ranks are threads: one submitter/drainer at once
_tasks: deque = deque()  # (sequence number, c, a, b) of every task not known to be done
_seq = 0  # tasks submitted since the last drain (the C side counts the same)


def gemm_submit(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Queue ``c += a.T @ b`` (``gemm_acc``'s case, same bits) for the worker thread; False
    when not queued, with the queue drained, so the caller may use ``c`` at once. ``a`` and
    ``b`` must not be written until drained (the hot path passes fp32 snapshot copies)."""
    global QUEUED, _seq
    if gemm_ready() and ASYNC:
        m = _mod
        with _queue_lock:
            done = m.gemm_submit(c, a, b)
            if done >= 0:
                _tasks.append((_seq, c, a, b))
                _seq += 1
                QUEUED = True
                while _tasks[0][0] < done:  # finished: their arrays may go
                    _tasks.popleft()
                return True
    drain()
    return False


def drain() -> None:
    """Finish every queued accumulation: wait for the worker, then run the tasks it left (a NaN
    already in PSUM halts it; gemm_acc's numpy path does those) with numpy, in order."""
    global QUEUED, _seq
    if not QUEUED:
        return
    with _queue_lock:
        if not QUEUED:  # another thread drained while this one waited
            return
        done, _ = _mod.gemm_drain()
        for seq, c, a, b in _tasks:
            if seq >= done:
                np.add(c, np.matmul(a.T, b), out=c)
        _tasks.clear()
        _seq = 0
        QUEUED = False  # only now: readers that see False must see the final values


def _after_fork_in_child() -> None:
    """The child's copy of the lock may be held by a thread that no longer exists."""
    global _queue_lock
    _queue_lock = threading.Lock()


atexit.register(drain)  # the worker must not write arrays the interpreter is freeing
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=drain, after_in_child=_after_fork_in_child)


def f32_to_bf16(src: np.ndarray) -> Optional[np.ndarray]:
    """``src.astype(bfloat16)`` for an fp32 array (round to nearest even, ml_dtypes' NaN), in
    one C pass; None when the C path does not apply."""
    m = module()
    if m is None or src.dtype != _F32 or src.ndim == 0:
        return None
    out = np.empty(src.shape, _BF16)
    m.f32_to_bf16(src, out.view(_U16))
    return out


class ProductBuffers:
    """fp32 matmul product arrays handed back once their only use, the PSUM accumulation of a
    temporary ``psum += nc_matmul(...)``, is done; the next product of that shape is computed into
    one (``np.matmul(..., out=)``: the same BLAS call, no allocation, the buffer still in cache)."""
    __slots__ = ("_free",)
    _KEEP = 2  # per shape: one in flight, one spare (an accumulation loop needs no more)
    _SHAPES = 16  # shapes kept at once (at most 2 x 16 x 256 KB for 128x512 products)

    def __init__(self):
        self._free = {}

    def take(self, shape) -> Optional[np.ndarray]:
        """A C-contiguous fp32 array of ``shape`` to compute into, or None."""
        lst = self._free.get(shape)
        if lst:
            try:
                return lst.pop()
            except IndexError:  # another core's thread took the last one
                return None
        return None

    def give(self, arr: np.ndarray) -> bool:
        """Keep ``arr`` for a later product (the caller holds the only reference); False when it
        is not kept (fast paths off, not a whole fp32 array, enough spares)."""
        if not ON:
            return False
        if arr.dtype != _F32 or arr.base is not None or not arr.flags.c_contiguous or \
                not arr.flags.writeable:
            return False
        lst = self._free.get(arr.shape)
        if lst is None:
            if len(self._free) >= self._SHAPES:  # bound the memory kept: start over
                self._free.clear()
            lst = self._free[arr.shape] = []
        if len(lst) >= self._KEEP:
            return False
        lst.append(arr)
        return True

    def clear(self) -> None:
        """Drop every kept buffer."""
        self._free.clear()


product_buffers = ProductBuffers()
