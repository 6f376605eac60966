"""``neuronxcc.nki.language`` (legacy, NKI 0.1): results are returned as new tiles; every call takes
``mask=`` and most take ``dtype=``."""
from __future__ import annotations

import numpy as np

from ...errors import KernelError, ShapeError, UnsupportedError
from .. import common
from ..common import (affine_range, device_print, finfo, fp32, bfp16, num_programs, program_id,
                      program_ndim, sequential_range, static_cast, static_range)
from ..common import legacy_tile_size as tile_size
from ...nki.core import dtypes as _dt
from ...nki.core.alloc import (Buffer, hbm, ndarray as _ndarray, private_hbm, psum, sbuf, shared_hbm,
                               shared_constant as _shared_constant)
from ...nki.ops.fill import filled as _filled
from ...nki.core.context import current as _current
from ...nki.core.conventions import PRESETS as _PRESETS
from ...nki.core.index_exprs import arange, ds, mgrid, par_dim
from ...nki.core.tensor import NkiTensor as tensor
from ...nki.ops import activation as _act, dma as _dma, elementwise as _ew, random as _rnd
from ...nki.ops import select as _sel
from ...nki.ops import reduce as _red, matmul as _te
from . import constants  # noqa: F401  (nl.constants.sizeinbytes)

_CONV = _PRESETS["legacy"]  # the neuronxcc compiler's conventions

# dtypes ----------------------------------------------------------------------------------------
bfloat16 = _dt.bfloat16
float16 = _dt.float16
float32 = _dt.float32
tfloat32 = _dt.tfloat32
float32r = _dt.float32
float8_e4m3 = _dt.float8_e4m3
float8_e5m2 = _dt.float8_e5m2
float8_e3m4 = _dt.float8_e3m4
float8_e4m3fn = _dt.float8_e4m3fn
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_
fp8_e4m3 = float8_e4m3

# tensor creation -------------------------------------------------------------------------------


def ndarray(shape, dtype, *, buffer=None, name="", **kw):
    """An uninitialized tensor; dims before ``par_dim`` are block dims."""
    return _ndarray(shape, dtype, buffer, name, conv=_CONV)


def zeros(shape, dtype, *, buffer=None, name="", **kw):
    """A tensor of zeros (dims before ``par_dim`` are block dims)."""
    return _filled(shape, dtype, buffer, name, 0, conv=_CONV)


def ones(shape, dtype, *, buffer=None, name="", **kw):
    """A tensor of ones."""
    return _filled(shape, dtype, buffer, name, 1, conv=_CONV)


def full(shape, fill_value, dtype, *, buffer=None, name="", **kw):
    """A tensor filled with ``fill_value``."""
    return _filled(shape, dtype, buffer, name, fill_value, conv=_CONV)


def empty_like(a, dtype=None, *, buffer=None, name="", **kw):
    """An uninitialized tensor shaped like ``a``."""
    return _ndarray(a.shape, dtype or a.dtype, buffer or _buffer_of(a), name, conv=_CONV)


def zeros_like(a, dtype=None, *, buffer=None, name="", **kw):
    """Zeros shaped like ``a``."""
    return zeros(a.shape, dtype or a.dtype, buffer=buffer or _buffer_of(a), name=name)


def ones_like(a, dtype=None, *, buffer=None, name="", **kw):
    """Ones shaped like ``a``."""
    return ones(a.shape, dtype or a.dtype, buffer=buffer or _buffer_of(a), name=name)


def full_like(a, fill_value, dtype=None, *, buffer=None, name="", **kw):
    """``fill_value`` everywhere, shaped like ``a``."""
    return full(a.shape, fill_value, dtype or a.dtype, buffer=buffer or _buffer_of(a), name=name)


def _buffer_of(a):
    return {"sbuf": sbuf, "psum": psum}.get(a._st.kind, sbuf)


def rand(shape, dtype=float32, *, buffer=None, name="", **kw):
    """Uniform [0, 1) values in a new tile."""
    return _rnd.rand(shape, dtype)


def random_seed(seed, *, mask=None, **kw):
    """Seed the random numbers of ``rand`` / ``dropout``."""
    _rnd.random_seed(seed, mask=mask)


def dropout(x, rate, *, dtype=None, mask=None, **kw):
    """``x`` with each element zeroed with probability ``rate``."""
    return _rnd.dropout(None, x, rate, dtype=dtype, mask=mask)


def shared_constant(constant, dtype=None, **kw):
    """A constant HBM tensor (an array or the path of a .npy file)."""
    return _shared_constant(constant, dtype)


def shared_identity_matrix(n, dtype=uint8, **kw):
    """An n x n identity constant in HBM."""
    return _shared_constant(np.identity(int(n)), dtype)


# memory movement -------------------------------------------------------------------------------


def load(src, *, mask=None, dtype=None, **kw):
    """HBM -> a new SBUF tile."""
    return _dma.load(src, dtype=dtype, mask=mask)


def store(dst, value, *, mask=None, **kw):
    """An SBUF tile (or a PSUM result, copied first) -> HBM."""
    _dma.store(dst, value, mask=mask)


def load_transpose2d(src, *, mask=None, dtype=None, **kw):
    """HBM -> a new SBUF tile with the two dims swapped by the DMA."""
    return _dma.load_transpose2d(src, dtype=dtype, mask=mask)


def copy(src, *, mask=None, dtype=None, **kw):
    """A new tile with the values of ``src``."""
    return _ew.tensor_copy(None, src, dtype=dtype, mask=mask)


def broadcast_to(src, *, shape, **kw):
    """A stride-0 view of ``src`` repeating its size-1 dims."""
    return src.broadcast_to(shape)


# arithmetic ------------------------------------------------------------------------------------

def _binary(name, default_dtype=None):
    # comparisons and logical ops default to dtype=bool in the legacy signatures
    def f(x, y, *, dtype=default_dtype, mask=None, **kw):
        return _ew.binary(name, x, y, dtype=dtype, mask=mask)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} with numpy broadcasting (``nl.{name}``); also an ALU token."
    return common.alu(name, f)


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
maximum = _binary("maximum")
minimum = _binary("minimum")
power = _binary("power")
mod = _binary("mod")
fmod = _binary("fmod")
equal = _binary("equal", bool_)
not_equal = _binary("not_equal", bool_)
less = _binary("less", bool_)
less_equal = _binary("less_equal", bool_)
greater = _binary("greater", bool_)
greater_equal = _binary("greater_equal", bool_)
logical_and = _binary("logical_and", bool_)
logical_or = _binary("logical_or", bool_)
logical_xor = _binary("logical_xor", bool_)
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")


def _unary(name, default_dtype=None):
    def f(x, *, dtype=default_dtype, mask=None, **kw):
        return _act.unary(name, x, dtype=dtype, mask=mask)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} (``nl.{name}``); also an activation token."
    return common.alu(name, f)


for _name in _act.UNARY_FUNCTIONS:  # nl.exp, nl.log, ... (logical_not defaults to a bool result)
    globals()[_name] = _unary(_name, bool_ if _name == "logical_not" else None)
del _name
identity = common.alu("copy", lambda x, **kw: _ew.tensor_copy(None, x))
common.alu("copy", copy)


def where(condition, x, y, *, dtype=None, mask=None, **kw):
    """Per element ``x`` where ``condition`` is nonzero, else ``y``."""
    return _sel.select(None, condition, x, y, dtype=dtype, mask=mask)


# reductions ------------------------------------------------------------------------------------

def _reduction(name, token, default_dtype=None):
    def f(x, axis=None, *, dtype=default_dtype, mask=None, keepdims=False, **kw):
        return _red.reduce_free(None, token, x, axis, dtype=dtype, mask=mask, keepdims=keepdims,
                                trailing=False)
    f.__name__ = name
    f.__doc__ = f"Reduce with {token} over free axes (``nl.{name}``); also an ALU token."
    return common.alu(token, f)


sum = _reduction("sum", "add")
max = _reduction("max", "maximum")
min = _reduction("min", "minimum")
prod = _reduction("prod", "multiply")
all = _reduction("all", "logical_and", bool_)
any = _reduction("any", "logical_or")


def mean(x, axis=None, *, dtype=None, mask=None, keepdims=False, **kw):
    """Mean over the free axes ``axis``."""
    return _red.mean(None, x, axis, dtype=dtype, mask=mask, keepdims=keepdims)


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kw):
    """Reduce ``x`` with ``op`` across the iterations of the loops ``loop_indices``."""
    return _red.loop_reduce(x, op, loop_indices, dtype=dtype, mask=mask)


def softmax(x, axis=-1, *, dtype=None, compute_dtype=None, mask=None, **kw):
    """exp(x - max) / sum: a reduce, an activation with the negated max as bias, a reciprocal
    and a multiply, as the compiler lowers it."""
    t = x
    ndim = t.ndim
    ax = axis if axis >= 0 else ndim + axis
    if ax != ndim - 1 or ndim != 2:
        raise UnsupportedError("nl.softmax is modelled for 2-D tiles over the last axis",
                               rule="softmax-axis", value=axis)
    neg_max = _red.reduce_free(None, "maximum", t, (1,), dtype=float32, negate=True)
    e = _act.activation(None, "exp", t, bias=neg_max, dtype=float32)
    s = _red.reduce_free(None, "add", e, (1,), dtype=float32)
    r = _act.unary("reciprocal", s, dtype=float32)
    return _ew.binary("multiply", e, r, dtype=dtype or t.dtype)


# matmul / transpose ----------------------------------------------------------------------------

def matmul(x, y, *, transpose_x=False, mask=None, **kw):
    """``x @ y`` (or ``x.T @ y``) into a new PSUM tile."""
    return _te.nl_matmul(x, y, transpose_x=transpose_x, mask=mask)


def transpose(x, *, dtype=None, mask=None, **kw):
    """Swap the partition and free axis of a 2-D tile."""
    if x.ndim != 2:
        raise ShapeError("nl.transpose takes a 2-D tile", rule="err_exceed_max_supported_dimension",
                         limit=2, value=x.ndim)
    return _te.nc_transpose(None, x, dtype=dtype, mask=mask)


# SPMD ------------------------------------------------------------------------------------------

class _SpmdDim(int):
    """``nl.spmd_dim(n, nl.nc(k))`` / ``nl.nc(k) * n``: a grid dim spread over k NeuronCores."""

    def __new__(cls, n, cores: int = 1):
        obj = super().__new__(cls, int(n))
        obj.cores = int(cores)
        return obj


class _NC:
    """``nl.nc(k)``: k NeuronCores; ``nl.nc(2) * 4`` is ``spmd_dim(8, nc(2))``."""

    def __init__(self, k: int):
        self.k = int(k)

    def __mul__(self, n):
        return _SpmdDim(int(n) * self.k, self.k)

    __rmul__ = __mul__


def nc(k):
    """``nl.nc(k)``: k NeuronCores, for an SPMD grid dim."""
    return _NC(k)


def spmd_dim(size, nc_=None):
    """A grid dim of ``size`` spread over the NeuronCores of ``nc_``."""
    return _SpmdDim(int(size), getattr(nc_, "k", 1))


def no_reorder():
    """Scope hint that keeps instruction order (no effect on values)."""
    import contextlib
    return contextlib.nullcontext()


# not modelled (named, never approximated) -------------------------------------------------------

def _unsupported(name):
    def f(*a, **kw):
        raise UnsupportedError(f"nl.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    return f


atomic_rmw = _unsupported("atomic_rmw")
all_reduce = _unsupported("all_reduce")
gather_flattened = _unsupported("gather_flattened")
