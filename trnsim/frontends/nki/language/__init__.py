"""``nki.language`` (NKI >= 0.2): tensor creation, the experimental dst-less wrappers
(``load/store/copy/matmul/transpose/softmax``), math ops returning new tiles, iterators (static ones
unroll, ``dynamic_range``/``fori_loop``/``while_loop`` run on runtime registers), buffers, dtypes.

No call takes ``mask=``; buffers are ``nl.sbuf``/``nl.psum``/``nl.hbm``/``nl.shared_hbm``/
``nl.private_hbm`` objects, never strings or integers.  Names shadow Python builtins here (``range``,
``abs``, ``max``...), as they do in the real module, so this file reaches builtins through
``builtins``.
"""
from __future__ import annotations

import builtins
import contextlib
import types
from typing import Any

import numpy as np

from ....errors import KernelError, ShapeError, UnsupportedError
from ... import common
from ...common import device_print as _device_print
from ...common import num_programs as _num_programs
from ...common import program_id as _program_id
from ...common import program_ndim as _program_ndim
from ...common import tile_size  # noqa: F401  (the same object as the legacy nl.tile_size)
from ....nki.core import alloc as _alloc
from ....nki.core import fastforward as _fastforward
from ....nki.core.alloc import Buffer, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from ....nki.core.context import current as _current
from ....nki.core.context import maybe_current as _maybe_current
from ....nki.core.index_exprs import DynSlice as _DynSlice
from ....nki.core.tensor import NkiTensor
from ....nki.ops import activation, dma, elementwise, fill as _fill, gather, matmul, random
from ....nki.ops import reduce, select
from .._checks import reject_legacy_kwargs as _reject
from .._signature import build as _build
from ..registers import NKIObject, VirtualRegister  # noqa: F401
from . import dtypes  # noqa: F401
from .dtypes import (DType, bfloat16, bool_, float4_e2m1fn_x4, float8_e4m3, float8_e4m3fn,  # noqa: F401
                     float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, float16,
                     float32, int8, int16, int32, tfloat32, uint8, uint16, uint32)
from . import compose as _cmp
from .table import ROWS as _ROWS, TOKENS as _TOKENS

# the instruction families the table's calls name (``ops.<family>.<function>``)
_ops = types.SimpleNamespace(activation=activation, dma=dma, elementwise=elementwise, gather=gather,
                             matmul=matmul, random=random, reduce=reduce, select=select)
del activation, dma, elementwise, gather, matmul, random, reduce, select
bool = bool_  # noqa: A001
tensor = NkiTensor  # annotation alias (``x: nl.tensor``)
dtype = DType


class MemoryRegion:
    """``nl.MemoryRegion``: the buffer objects (``nl.sbuf`` ...) are its members."""
    sbuf = sbuf
    psum = psum
    hbm = hbm
    private_hbm = private_hbm
    shared_hbm = shared_hbm


# -- buffers -------------------------------------------------------------------------------------

def _buffer_of(x) -> str:
    if isinstance(x, NkiTensor):
        return x._st.kind
    if isinstance(x, Buffer):
        return x.name
    if isinstance(x, str):
        return x
    raise KernelError(f"{x!r} is not a buffer (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, "
                      "nl.private_hbm) or a tensor", rule="buffer-type", value=repr(x))


def is_hbm(buffer) -> bool:
    """True for nl.hbm, nl.shared_hbm and nl.private_hbm (or a tensor living there)."""
    return "hbm" in _buffer_of(buffer)


def is_sbuf(buffer) -> bool:
    """True for nl.sbuf (or a tensor living there)."""
    return _buffer_of(buffer) == "sbuf"


def is_psum(buffer) -> bool:
    """True for nl.psum (or a tensor living there)."""
    return _buffer_of(buffer) == "psum"


def is_on_chip(buffer) -> bool:
    """True for SBUF and PSUM (or a tensor living there)."""
    return _buffer_of(buffer) in ("sbuf", "psum")


# -- tensor creation, memory movement, math, reductions: generated from the signature table -------

_namespace = dict(ops=_ops, cmp=_cmp, alloc=_alloc, fill=_fill, common=common, dtypes=dtypes,
                  sbuf=sbuf, _reject=_reject, __file__=__file__, __name__=__name__)
_build(_ROWS, _namespace, {})
globals().update({_row.name: _namespace[_row.name] for _row in _ROWS})
for _name, _token in _TOKENS.items():  # nl.add, nl.exp, nl.sum ... also name ALU tokens
    common.alu(_token, _namespace[_name])
del _name, _token


# -- tokens with no modelled function ------------------------------------------------------------


def _token_only(name, canonical):
    """An op token with no modelled function (passing it to an instruction names it)."""
    def f(*a, **kw):
        raise UnsupportedError(f"nl.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    if canonical:
        common.alu(canonical, f)
    return f


bypass = _token_only("bypass", "copy")
identity = bypass
gelu_apprx_sigmoid_dx = _token_only("gelu_apprx_sigmoid_dx", None)
average = _token_only("average", None)
prelu = _token_only("prelu", None)


# -- indexing and iteration ----------------------------------------------------------------------

def ds(start, size, step=1):
    """The slice ``start:start+size`` (``start`` may be a loop index or a register)."""
    return _DynSlice(start, size, step)


def _bound(x, what: str) -> int:
    reg = getattr(x, "_trnsim_register_value", None)
    if reg is not None:
        return int(reg())
    if isinstance(x, (builtins.bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise KernelError(f"{what} must be an integer (or a register for dynamic loops), "
                          f"got {type(x).__name__}", rule="loop-bounds", value=repr(x))
    return int(x)


def _static_args(start, stop, step):
    if stop is None:
        start, stop = 0, start
    for v in (start, stop, step):
        if getattr(v, "_trnsim_register_value", None) is not None:
            raise KernelError("static loops (range/affine_range/...) unroll at trace time; a register "
                              "bound needs nl.dynamic_range or nl.fori_loop",
                              rule="static-loop-register", value=type(v).__name__)
    return _bound(start, "start"), _bound(stop, "stop"), _bound(step, "step")


def range(start, stop=None, step=1):  # noqa: A001
    """Unrolled loop (Python's range).  Timing-only runs with TRNSIM_FAST_FORWARD=all synthesize
    regular iterations instead of unrolling them (core/fastforward.py)."""
    r = builtins.range(*_static_args(start, stop, step))
    ctx = _maybe_current()
    if ctx is not None and ctx.options.fast_forward == "all" and _fastforward.enabled(ctx):
        return common._loop(r, False, True)
    return r


affine_range = range
sequential_range = range
static_range = range


def _device_step(step, what: str, rule: str) -> int:
    if getattr(step, "_trnsim_register_value", None) is not None or _bound(step, "step") <= 0:
        raise KernelError(f"{what} step must be a compile-time positive integer",
                          rule=rule, limit="> 0", value=repr(step))
    return int(step)


def _device_loop(lo: int, stop, step: int, what: str):
    """The iterations of a hardware loop: the counter starts at ``lo`` (read once, when the loop is
    entered) and the loop-back branch compares it with ``stop`` before every iteration, so a
    register bound that the body reloads takes effect at the next check (the compiler lowers
    dynamic loops to branching instructions on the engine sequencers; ``while_loop`` likewise
    re-checks its condition register before each iteration).  Each iteration gets a fresh register
    holding the counter: writing to it does not steer the loop."""
    i = lo
    while i < _bound(stop, f"{what} stop"):
        yield VirtualRegister(i)
        i += step


def dynamic_range(start, stop=None, step=1):
    """A device loop: ``start``/``stop`` may be registers.  ``start`` is read when the loop is
    entered; a register ``stop`` is re-read before every iteration (see ``_device_loop``).  The
    loop variable is a register (use it through ``.ap(scalar_offset=i)``, ``nl.ds(i, n)``...)."""
    if stop is None:
        start, stop = 0, start
    st = _device_step(step, "dynamic_range", "dynamic-range-step")
    lo = _bound(start, "start")
    _record_loop("dynamic_range", lo, _bound(stop, "stop"), st)
    return _device_loop(lo, stop, st, "dynamic_range")


def fori_loop(lower, upper, body_fun, step=1):
    """``i = lower; while i < upper: body_fun(i); i += step`` on device: ``lower`` is read once,
    a register ``upper`` before every iteration; ``i`` is a fresh register each iteration."""
    st = _device_step(step, "fori_loop", "fori-loop-step")
    lo = _bound(lower, "lower")
    _record_loop("fori_loop", lo, _bound(upper, "upper"), st)
    for i in _device_loop(lo, upper, st, "fori_loop"):
        body_fun(i)
    return None


def while_loop(init, body_fun):
    """``r = init; while r != 0: r = body_fun(r)`` on device."""
    r = init if isinstance(init, VirtualRegister) else VirtualRegister(_bound(init, "init"))
    n = 0
    while int(r._trnsim_register_value()) != 0:
        nxt = body_fun(VirtualRegister(r._trnsim_register_value()))
        if nxt is None:
            raise KernelError("while_loop body must return the next condition register",
                              rule="while-loop-body", value="None")
        r = nxt if isinstance(nxt, VirtualRegister) else VirtualRegister(_bound(nxt, "condition"))
        n += 1
    _record_loop("while_loop", 0, n, 1)
    return None


def _record_loop(kind: str, lo: int, hi: int, step: int) -> None:
    ctx = _current()
    ctx.record("sync", kind, [], [], 1, 1, "int32", "-",
               (("start", lo), ("stop", hi), ("step", step)))


@contextlib.contextmanager
def no_reorder():
    """Scheduling hint (no effect on values)."""
    yield


# -- program ids ---------------------------------------------------------------------------------

def program_id(axis=0):
    """This logical NeuronCore's index within the LNC launch (0 or 1)."""
    return _program_id(axis)


def num_programs(axes=0):
    """The LNC degree of the launch (1 or 2)."""
    return _num_programs(axes)


def program_ndim():
    """The number of launch-grid dims (1 under LNC=2, else 0)."""
    return _program_ndim()


def static_cast(input_data, dtype):
    """Host-side cast of a numpy array or scalar."""
    return common.static_cast(input_data, dtype)


finfo = common.finfo
fp32 = common.fp32
bfp16 = common.bfp16
