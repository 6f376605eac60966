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
from typing import Any

import numpy as np

from ....errors import KernelError, ShapeError, UnsupportedError
from ... import common
from ...common import device_print as _device_print
from ...common import num_programs as _num_programs
from ...common import program_id as _program_id
from ...common import program_ndim as _program_ndim
from ...common import tile_size  # noqa: F401  (the same object as the legacy nl.tile_size)
from ...core import alloc as _alloc
from ...core.alloc import Buffer, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from ...core import fastforward as _fastforward
from ...core.context import current as _current
from ...core.context import maybe_current as _maybe_current
from ...core.index import DynSlice as _DynSlice
from ...core.tensor import NkiTensor
from ...ops import activation as _act, dma as _dma, elementwise as _ew, gpsimd as _gp
from ...ops import reduce as _red, tensor_engine as _te
from .._checks import reject_legacy_kwargs as _reject
from . import dtypes  # noqa: F401
from .dtypes import (DType, bfloat16, bool_, float4_e2m1fn_x4, float8_e4m3, float8_e4m3fn,  # noqa: F401
                     float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, float16,
                     float32, int8, int16, int32, tfloat32, uint8, uint16, uint32)

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


class NKIObject:
    """Base class for kernel-side dataclasses and configuration objects (a plain class on CPU)."""

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)


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
    return _buffer_of(buffer) == "sbuf"


def is_psum(buffer) -> bool:
    return _buffer_of(buffer) == "psum"


def is_on_chip(buffer) -> bool:
    return _buffer_of(buffer) in ("sbuf", "psum")


# -- tensor creation -----------------------------------------------------------------------------

def ndarray(shape, dtype, buffer=sbuf, name="", address=None, **kw):
    """An uninitialized tensor; the partition dim is always dim 0 (no block dims)."""
    _reject(kw, "nl.ndarray")
    return _alloc.ndarray(shape, dtype, sbuf if buffer is None else buffer, name, legacy=False,
                          address=address)


def zeros(shape, dtype, buffer=sbuf, name="", **kw):
    _reject(kw, "nl.zeros")
    return _alloc.filled(shape, dtype, sbuf if buffer is None else buffer, name, 0, legacy=False)


def ones(shape, dtype, buffer=sbuf, name="", **kw):
    _reject(kw, "nl.ones")
    return _alloc.filled(shape, dtype, sbuf if buffer is None else buffer, name, 1, legacy=False)


def full(shape, fill_value, dtype, buffer=sbuf, name="", **kw):
    _reject(kw, "nl.full")
    return _alloc.filled(shape, dtype, sbuf if buffer is None else buffer, name, fill_value,
                         legacy=False)


def _like_buffer(x, buffer):
    if buffer is not None:
        return buffer
    return {"psum": psum, "hbm": hbm, "shared_hbm": shared_hbm, "private_hbm": private_hbm}.get(
        x._st.kind, sbuf)


def empty_like(x, dtype=None, buffer=None, name="", **kw):
    _reject(kw, "nl.empty_like")
    return ndarray(x.shape, dtype or x.dtype, _like_buffer(x, buffer), name)


def zeros_like(x, dtype=None, buffer=None, name="", **kw):
    _reject(kw, "nl.zeros_like")
    return zeros(x.shape, dtype or x.dtype, buffer or sbuf, name)


def ones_like(x, dtype=None, buffer=None, name="", **kw):
    _reject(kw, "nl.ones_like")
    return ones(x.shape, dtype or x.dtype, buffer or sbuf, name)


def full_like(x, fill_value, dtype=None, buffer=None, name="", **kw):
    _reject(kw, "nl.full_like")
    return full(x.shape, fill_value, dtype or x.dtype, buffer or sbuf, name)


def rand(shape, dtype=float32, buffer=sbuf, name="", **kw):
    """Uniform [0, 1) values (seeded by ``nl.random_seed`` / TRNSIM_SEED)."""
    _reject(kw, "nl.rand")
    t = ndarray(shape, dtype, buffer, name)
    _gp.rand(None, None, dst=t)
    return t


def random_seed(seed, **kw):
    _reject(kw, "nl.random_seed")
    _gp.random_seed(seed)


def shared_constant(constant, dtype=None, **kw):
    """A constant HBM tensor (an array or the path of a .npy file)."""
    _reject(kw, "nl.shared_constant")
    return _alloc.shared_constant(constant, dtype)


def shared_identity_matrix(n, dtype=uint8, dst=None, **kw):
    """An n x n identity in SBUF (a constant in HBM, DMA-copied into ``dst`` or a new tile)."""
    _reject(kw, "nl.shared_identity_matrix")
    n = int(n)
    const = _alloc.shared_constant(np.identity(n), dtype)
    if dst is None:
        dst = ndarray((n, n), dtype, sbuf, name="identity")
    elif tuple(dst.shape) != (n, n):
        raise ShapeError(f"shared_identity_matrix: dst has shape {dst.shape}", rule="dst-shape",
                         limit=(n, n), value=dst.shape)
    _dma.copy(dst, const)
    return dst


# -- memory movement (experimental wrappers) -----------------------------------------------------

def load(src, dtype=None, **kw):
    """HBM -> a new SBUF tile."""
    _reject(kw, "nl.load")
    return _dma.load(src, dtype=dtype)


def store(dst, value, **kw):
    """An SBUF tile -> HBM."""
    _reject(kw, "nl.store")
    _dma.store(dst, value)


def load_transpose2d(src, dtype=None, **kw):
    _reject(kw, "nl.load_transpose2d")
    return _dma.load_transpose2d(src, dtype=dtype)


def copy(x, dtype=None, **kw):
    """A new SBUF tile with the values of ``x``; also the identity activation token."""
    _reject(kw, "nl.copy")
    return _ew.tensor_copy(None, x, dtype=dtype)


common.alu("copy", copy)


def broadcast_to(x, shape, dtype=None, **kw):
    """A stride-0 view of ``x`` repeating its size-1 dims (copied when ``dtype`` is given)."""
    _reject(kw, "nl.broadcast_to")
    v = x.broadcast_to(shape)
    return v if dtype is None else _ew.tensor_copy(None, v, dtype=dtype)


def expand_dims(x, axis, **kw):
    _reject(kw, "nl.expand_dims")
    return x.expand_dim(axis)


def transpose(x, dtype=None, **kw):
    """Swap the partition and (single) free axis of a 2-D tile."""
    _reject(kw, "nl.transpose")
    if x.ndim != 2:
        raise ShapeError("nl.transpose takes a 2-D tile", rule="err_exceed_max_supported_dimension",
                         limit=2, value=x.ndim)
    return _te.nc_transpose(None, x, dtype=dtype)


def matmul(x, y, transpose_x=False, **kw):
    """``x @ y`` (or ``x.T @ y``) into a new PSUM tile (fp32)."""
    _reject(kw, "nl.matmul")
    return _te.nl_matmul(x, y, transpose_x=transpose_x)


def gather_flattened(data, indices, axis=0, dtype=None, **kw):
    """A new tile shaped like ``indices``: per partition, the elements of ``data`` at ``indices``
    with the free dims from free axis ``axis`` on flattened (``axis=0``, the default, flattens all
    free dims; earlier free dims are batch dims shared with ``indices``; ``axis=-1`` gathers
    along the last dim like ``np.take_along_axis``).  See ``ops.newops.gather_flattened``."""
    _reject(kw, "nl.gather_flattened")
    from ...ops.newops import gather_flattened as _gather
    out = _gather(data, indices, axis)
    return out if dtype is None else _ew.tensor_copy(None, out, dtype=dtype)


# -- elementwise math ----------------------------------------------------------------------------

def _binary(name, token=None):
    def f(x, y, dtype=None, **kw):
        _reject(kw, f"nl.{name}")
        return _ew.binary(token or name, x, y, dtype=dtype)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} with numpy broadcasting; also the ALU token ``nl.{name}``."
    return common.alu(token or name, f)


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
maximum = _binary("maximum")
minimum = _binary("minimum")
power = _binary("power")
mod = _binary("mod")
fmod = _binary("fmod")  # C fmod: the sign of the dividend (nl.mod: of the divisor)


def _by_magnitude(name):
    def f(x, y, dtype=None, **kw):
        _reject(kw, f"nl.{name}")
        _ew.check_generation(f"nl.{name}", 4)
        return _ew.binary(f"{name}_signed", x, y, dtype=dtype, opname=name)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = (f"Elementwise {name}: the signed value of the input with the "
                 f"{'larger' if name == 'abs_max' else 'smaller'} magnitude (y on ties); "
                 "NeuronCore-v4 (trn3) only.")
    return f


abs_max = common.alu("abs_max", _by_magnitude("abs_max"))
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
logical_shift_right = _binary("logical_shift_right")
arithmetic_shift_right = _binary("arithmetic_shift_right")


def _unary(name):
    def f(x, dtype=None, **kw):
        _reject(kw, f"nl.{name}")
        return _act.unary(name, x, dtype=dtype)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}; also the activation token ``nl.{name}``."
    return common.alu(name, f)


for _name in _act.UNARY_FUNCTIONS:  # nl.exp, nl.log, ...
    globals()[_name] = _unary(_name)
del _name


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
abs_min = _by_magnitude("abs_min")


def where(condition, x, y, dtype=None, **kw):
    """Per element ``x`` where ``condition`` is nonzero, else ``y`` (tiles or scalars)."""
    _reject(kw, "nl.where")
    return _ew.select(None, condition, x, y, dtype=dtype)


def dropout(x, rate, dtype=None, **kw):
    _reject(kw, "nl.dropout")
    return _gp.dropout(None, x, rate, dtype=dtype)


# -- reductions ----------------------------------------------------------------------------------

def _reduction(name, token):
    def f(x, axis, dtype=None, keepdims=False, **kw):
        _reject(kw, f"nl.{name}")
        return _red.reduce_free(None, token, x, axis, dtype=dtype, keepdims=keepdims)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Reduce with {token} over the trailing free axes; also the ALU token ``nl.{name}``."
    return common.alu(token, f)


sum = _reduction("sum", "add")  # noqa: A001
max = _reduction("max", "maximum")  # noqa: A001
min = _reduction("min", "minimum")  # noqa: A001
prod = _reduction("prod", "multiply")
all = _reduction("all", "logical_and")  # noqa: A001
any = _reduction("any", "logical_or")  # noqa: A001


def mean(x, axis, dtype=None, keepdims=False, **kw):
    _reject(kw, "nl.mean")
    return _red.mean(None, x, axis, dtype=dtype, keepdims=keepdims)


def var(x, axis, dtype=None, keepdims=False, **kw):
    """Population variance over ``axis`` (result keeps the reduced dims, as documented)."""
    _reject(kw, "nl.var")
    m = _red.mean(None, x, axis, dtype=float32, keepdims=True)
    d = _ew.binary("subtract", x, m, dtype=float32)
    sq = _ew.binary("multiply", d, d, dtype=float32)
    return _red.mean(None, sq, axis, dtype=dtype or x.dtype, keepdims=True)


def softmax(x, axis=-1, dtype=None, **kw):
    """exp(x - max) / sum over the last axis of a 2-D tile."""
    _reject(kw, "nl.softmax")
    ax = axis if axis >= 0 else x.ndim + axis
    if ax != x.ndim - 1 or x.ndim != 2:
        raise UnsupportedError("nl.softmax is modelled for 2-D tiles over the last axis",
                               rule="softmax-axis", value=axis)
    neg_max = _red.reduce_free(None, "maximum", x, (1,), dtype=float32, negate=True)
    e = _act.activation(None, "exp", x, bias=neg_max, dtype=float32)
    s = _red.reduce_free(None, "add", e, (1,), dtype=float32)
    r = _act.unary("reciprocal", s, dtype=float32)
    return _ew.binary("multiply", e, r, dtype=dtype or x.dtype)


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, **kw):
    """``x / sqrt(sum(x^2)/n + eps) * w``."""
    _reject(kw, "nl.rms_norm")
    sq = _act.unary("square", x, dtype=float32)
    s = _red.reduce_free(None, "add", sq, axis, dtype=float32, keepdims=True)
    ms = _ew.binary("multiply", s, 1.0 / float(n), dtype=float32)
    ms = _ew.binary("add", ms, float(epsilon), dtype=float32)
    r = _act.unary("rsqrt", ms, dtype=float32)
    y = _ew.binary("multiply", x, r, dtype=float32)
    return _ew.binary("multiply", y, w, dtype=dtype or x.dtype)


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
    from ..isa import VirtualRegister
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
    from ..isa import VirtualRegister
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
    return _program_ndim()


def device_print(print_prefix, tensor=None, **kw):
    """Print a tensor's values from inside the kernel (stdout)."""
    _reject(kw, "nl.device_print")
    _device_print(print_prefix, tensor)


def static_cast(input_data, dtype):
    """Host-side cast of a numpy array or scalar."""
    return common.static_cast(input_data, dtype)


finfo = common.finfo
fp32 = common.fp32
bfp16 = common.bfp16
