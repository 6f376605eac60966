"""``neuronxcc.nki.isa`` (legacy): ISA instructions that return their result tile."""
from __future__ import annotations

from enum import IntEnum

import numpy as np

from ...errors import IndexingError, KernelError, UnsupportedError
from ...source import describe, user_loc
from ...nki.core.alu import token_name
from ...nki.core.tensor import NkiTensor
from ..common import NcVersion as nc_version, get_nc_sub_version, get_nc_version  # noqa: F401
from ...nki.core.index_exprs import IndexExpr, Predicate, _IndexBase, _align
from ...nki.ops import activation as _act, dma as _dma, elementwise as _ew, gather as _ga
from ...nki.ops import random as _rnd, scan as _scan, select as _sel, top8 as _top8
from ...nki.ops import reduce as _red, matmul as _te
from ...nki.ops.accumulate import ReduceCmd as reduce_cmd  # noqa: F401
from ...nki.ops.base import Engine as engine
from ...nki.ops.dma import OobMode as oob_mode  # noqa: F401


class dge_mode(IntEnum):
    """Legacy numbering: none=0, swdge=1, hwdge=2, unknown=3."""
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, tile_position=(), tile_size=(), mask=None, perf_mode=None, **kw):
    """stationary.T @ moving into a new PSUM tile (fp32)."""
    return _te.nc_matmul(None, stationary, moving, is_stationary_onezero=is_stationary_onezero,
                         is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                         tile_position=tile_position, tile_size=tile_size, mask=mask,
                         perf_mode=perf_mode)


def nc_transpose(data, *, mask=None, dtype=None, engine=None, **kw):
    """Swap partition and free axis into a new tile (Tensor engine by default)."""
    return _te.nc_transpose(None, data, engine=engine, mask=mask, dtype=dtype)


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=None, mask=None, dtype=None, **kw):
    """op(data * scale + bias) into a new tile on the Scalar engine."""
    return _act.activation(None, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                           reduce_res=reduce_res, reduce_cmd=reduce_cmd or 0, dtype=dtype, mask=mask)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None,
                      dtype=None, **kw):
    """activation plus a free-axis reduction into ``reduce_res``."""
    return _act.activation_reduce(None, op, data, reduce_op=reduce_op, reduce_res=reduce_res,
                                  bias=bias, scale=scale, dtype=dtype, mask=mask)


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=None, **kw):
    """data1 op data2; a (P, 1) operand broadcasts (the compiler lowers it to tensor_scalar)."""
    if _broadcasts(data1, data2):
        return _ew.binary(token_name(op), data1, data2, dtype=dtype, mask=mask, engine=engine,
                          opname="tensor_tensor")
    return _ew.tensor_tensor(None, data1, data2, op, dtype=dtype, mask=mask, engine=engine)


def _broadcasts(a, b) -> bool:
    """Two tiles of the same partitions whose free shapes differ but broadcast."""
    if not (isinstance(a, NkiTensor) and isinstance(b, NkiTensor)) or a.size == b.size or \
            a.shape[0] != b.shape[0]:
        return False
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False
    return True


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *,
                  dtype=None, mask=None, engine=None, **kw):
    """(data op0 operand0) op1 operand1 with scalar or (P, 1) operands, into a new tile."""
    return _ew.tensor_scalar(None, data, op0, operand0, reverse0, op1, operand1, reverse1,
                             dtype=dtype, mask=mask, engine=engine)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         dtype=None, mask=None, **kw):
    """(data op0 operand0) op1 operand1 with operand1 a tile, into a new tile."""
    return _ew.scalar_tensor_tensor(None, data, op0, operand0, op1, operand1, reverse0, reverse1,
                                    dtype=dtype, mask=mask)


def tensor_copy(src, *, mask=None, dtype=None, engine=None, **kw):
    """A copy of ``src`` in a new tile (Vector/Scalar/GpSimd)."""
    return _ew.tensor_copy(None, src, dtype=dtype, mask=mask, engine=engine)


def memset(shape, value, dtype, *, mask=None, engine=None, **kw):
    """A new tile of ``shape`` filled with ``value``."""
    from ...nki.core.context import current
    return _ew.memset(current(), shape, value, dtype, mask=mask, engine=engine)


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kw):
    """Reduce the free axes ``axis`` of ``data`` into a new tile."""
    return _red.reduce_free(None, op, data, axis, dtype=dtype, mask=mask, negate=negate,
                            keepdims=keepdims)


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kw):
    """Reduce across partitions (GpSimd) into a new tile."""
    return _red.partition_reduce(None, op, data, dtype=dtype, mask=mask)


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None,
                         mask=None, **kw):
    """data op0 operand0 into a new tile, reduced over the free axes into ``reduce_res``."""
    return _red.tensor_scalar_reduce(None, data, op0, operand0, reduce_op, reduce_res, reverse0,
                                     dtype=dtype, mask=mask)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *,
                       dtype=None, mask=None, **kw):
    """Per partition r[i] = op1(op0(data0[i], r[i-1]), data1[i]) into a new tile."""
    return _scan.tensor_tensor_scan(None, data0, data1, initial, op0, op1, reverse0, reverse1,
                                   dtype=dtype, mask=mask)


def max8(*, src, mask=None, dtype=None, **kw):
    """The 8 largest values per partition, descending, in a new tile."""
    return _top8.max8(None, src, dtype=dtype, mask=mask)


def bn_stats(data, *, mask=None, dtype=None, **kw):
    """Per-partition batch-norm statistics of ``data`` in a new tile."""
    return _red.bn_stats(None, data, dtype=dtype, mask=mask)


def bn_aggr(data, *, mask=None, dtype=None, **kw):
    """Aggregated bn_stats results (mean, variance) in a new tile."""
    return _red.bn_aggr(None, data, dtype=dtype, mask=mask)


def reciprocal(data, *, dtype=None, mask=None, **kw):
    """1/x on the Vector engine (more precise than the Scalar activation), in a new tile."""
    return _ew.reciprocal(None, data, dtype=dtype, mask=mask)


def iota(expr, dtype, *, mask=None, **kw):
    """The values of an affine index expression (nl.arange / nl.mgrid) in a new tile, on GpSimd."""
    if isinstance(expr, (int, np.integer)):
        expr = IndexExpr(int(expr), (0, 0), (1, 1))
    if not isinstance(expr, _IndexBase):
        raise KernelError("iota takes an index expression built from nl.arange / nl.mgrid",
                          rule="iota-expr", value=type(expr).__name__, where=_where())
    shape = tuple(expr.shape)
    if len(shape) < 2:
        raise IndexingError("iota expressions must be at least 2-D (lift aranges with [:, None])",
                            rule="err_1d_arange_not_supported", limit=">= 2-D index expressions",
                            value=f"{len(shape)}-D expression of shape {shape}", where=_where())
    return _ga.iota(None, expr.dense(), dtype, mask=mask)


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kw):
    """``on_true_tile`` where the affine predicate over its index space holds, else the scalar."""
    if not isinstance(pred, (Predicate, bool, np.bool_)):
        raise KernelError("affine_select pred must be a comparison of index expressions",
                          rule="affine-select-pred", value=type(pred).__name__, where=_where())
    return _sel.affine_select(None, on_true_tile, on_false_value, lambda shape: _holds(pred, shape),
                              dtype=dtype, mask=mask)


def _holds(pred, shape) -> np.ndarray:
    """A legacy predicate (or a bool) evaluated over ``shape`` as a bool array."""
    if isinstance(pred, Predicate):
        pm = _align(pred.values(), shape)
        return np.ones(shape, bool) if pm is None else (np.zeros(shape, bool) if pm is False else pm)
    return np.full(shape, bool(pred))


def _where() -> str:
    return describe(user_loc())


def dropout(data, prob, *, mask=None, dtype=None, **kw):
    """``data`` with each element zeroed with probability ``prob``, in a new tile."""
    return _rnd.dropout(None, data, prob, dtype=dtype, mask=mask)


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None, **kw):
    """dst = src through the DMA engines."""
    _dma.copy(dst, src, mask=mask, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode)


def dma_transpose(src, *, axes=None, mask=None, dtype=None, **kw):
    """``src`` transposed by the DMA into a new tile."""
    return _dma.dma_transpose(None, src, axes=axes, dtype=dtype, mask=mask)


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kw):
    """Move partitions within each 32-partition quadrant of ``src`` into ``dst``."""
    _ga.stream_shuffle(dst, src, shuffle_mask)


def tensor_copy_predicated(*, src, dst, predicate, mask=None, reverse_pred=False, **kw):
    """Copy ``src`` into ``dst`` where ``predicate`` is nonzero."""
    _sel.copy_predicated(dst, src, predicate, reverse_pred=reverse_pred, mask=mask)


def _unsupported(name):
    def f(*a, **kw):
        raise UnsupportedError(f"nisa.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    return f


for _n in ("select_reduce", "range_select", "local_gather", "nc_find_index8", "nc_match_replace8",
           "tensor_copy_dynamic_src", "tensor_copy_dynamic_dst", "sequence_bounds"):
    globals().setdefault(_n, _unsupported(_n))
