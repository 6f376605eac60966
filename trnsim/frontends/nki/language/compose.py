"""``nki.language`` calls made of several instructions (or of a view and an instruction), as the
compiler lowers them; the signature table (``language/table.py``) calls these."""
from __future__ import annotations

import numpy as np

from ....errors import ShapeError, UnsupportedError
from ....nki.core import alloc as _alloc, gates as _gates
from ....nki.core.alloc import hbm, private_hbm, psum, sbuf, shared_hbm
from ....nki.core.context import current as _current
from ....nki.core.conventions import PRESETS
from ....nki.ops import activation as _act, dma as _dma, elementwise as _ew, gather as _ga
from ....nki.ops import matmul as _te, random as _rnd, reduce as _red
from . import dtypes as _d

CONV = PRESETS["new"]  # the NKI >= 0.2 compiler's conventions


def alloc(shape, dtype, buffer, name="", address=None):
    """``nl.ndarray``: an allocation in ``buffer`` (None: SBUF) under the new API's conventions."""
    return _alloc.ndarray(shape, dtype, sbuf if buffer is None else buffer, name, conv=CONV,
                          address=address)


def like_buffer(x, buffer):
    """``buffer`` or, when None, the buffer ``x`` lives in."""
    if buffer is not None:
        return buffer
    return {"psum": psum, "hbm": hbm, "shared_hbm": shared_hbm, "private_hbm": private_hbm}.get(
        x._st.kind, sbuf)


def rand(shape, dtype, buffer, name):
    """Uniform [0, 1) values in a new tensor (seeded by ``nl.random_seed`` / TRNSIM_SEED)."""
    t = alloc(shape, dtype, buffer, name)
    _rnd.rand(None, None, dst=t)
    return t


def shared_identity_matrix(n, dtype, dst):
    """An n x n identity: a constant in HBM, DMA-copied into ``dst`` or a new SBUF tile."""
    n = int(n)
    const = _alloc.shared_constant(np.identity(n), dtype)
    if dst is None:
        dst = alloc((n, n), dtype, sbuf, name="identity")
    elif tuple(dst.shape) != (n, n):
        raise ShapeError(f"shared_identity_matrix: dst has shape {dst.shape}", rule="dst-shape",
                         limit=(n, n), value=dst.shape)
    _dma.copy(dst, const)
    return dst


def broadcast_to(x, shape, dtype):
    """A stride-0 view of ``x`` repeating its size-1 dims (copied when ``dtype`` is given)."""
    v = x.broadcast_to(shape)
    return v if dtype is None else _ew.tensor_copy(None, v, dtype=dtype)


def transpose(x, dtype):
    """Swap the partition and (single) free axis of a 2-D tile."""
    if x.ndim != 2:
        raise ShapeError("nl.transpose takes a 2-D tile", rule="err_exceed_max_supported_dimension",
                         limit=2, value=x.ndim)
    return _te.nc_transpose(None, x, dtype=dtype)


def gather_flattened(data, indices, axis, dtype):
    """``nki.ops.gather.gather_flattened``, then a copy into ``dtype`` when given."""
    out = _ga.gather_flattened(data, indices, axis)
    return out if dtype is None else _ew.tensor_copy(None, out, dtype=dtype)


def by_magnitude(name, x, y, dtype):
    """abs_max / abs_min: the signed input of larger / smaller magnitude (NeuronCore-v4)."""
    _gates.require(_current(), f"nl.{name}")
    return _ew.binary(f"{name}_signed", x, y, dtype=dtype, opname=name)


def var(x, axis, dtype):
    """Population variance over ``axis`` (the result keeps the reduced dims, as documented)."""
    m = _red.mean(None, x, axis, dtype=_d.float32, keepdims=True)
    d = _ew.binary("subtract", x, m, dtype=_d.float32)
    sq = _ew.binary("multiply", d, d, dtype=_d.float32)
    return _red.mean(None, sq, axis, dtype=dtype or x.dtype, keepdims=True)


def softmax(x, axis, dtype):
    """exp(x - max) / sum over the last axis of a 2-D tile: a reduce, an activation with the
    negated max as bias, a reciprocal and a multiply, as the compiler lowers it."""
    ax = axis if axis >= 0 else x.ndim + axis
    if ax != x.ndim - 1 or x.ndim != 2:
        raise UnsupportedError("nl.softmax is modelled for 2-D tiles over the last axis",
                               rule="softmax-axis", value=axis)
    neg_max = _red.reduce_free(None, "maximum", x, (1,), dtype=_d.float32, negate=True)
    e = _act.activation(None, "exp", x, bias=neg_max, dtype=_d.float32)
    s = _red.reduce_free(None, "add", e, (1,), dtype=_d.float32)
    r = _act.unary("reciprocal", s, dtype=_d.float32)
    return _ew.binary("multiply", e, r, dtype=dtype or x.dtype)


def rms_norm(x, w, axis, n, epsilon, dtype):
    """``x / sqrt(sum(x^2)/n + eps) * w``."""
    sq = _act.unary("square", x, dtype=_d.float32)
    s = _red.reduce_free(None, "add", sq, axis, dtype=_d.float32, keepdims=True)
    ms = _ew.binary("multiply", s, 1.0 / float(n), dtype=_d.float32)
    ms = _ew.binary("add", ms, float(epsilon), dtype=_d.float32)
    r = _act.unary("rsqrt", ms, dtype=_d.float32)
    y = _ew.binary("multiply", x, r, dtype=_d.float32)
    return _ew.binary("multiply", y, w, dtype=dtype or x.dtype)
