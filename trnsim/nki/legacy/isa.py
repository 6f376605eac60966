"""``neuronxcc.nki.isa`` (legacy): ISA instructions that return their result tile."""
from __future__ import annotations

from enum import IntEnum

from ...errors import UnsupportedError
from ..common import NcVersion as nc_version, get_nc_sub_version, get_nc_version  # noqa: F401
from ..ops import activation as _act, dma as _dma, elementwise as _ew, gpsimd as _gp
from ..ops import reduce as _red, tensor_engine as _te
from ..ops.activation import ReduceCmd as reduce_cmd  # noqa: F401
from ..ops.base import Engine as engine
from ..ops.dma import OobMode as oob_mode  # noqa: F401


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
    return _te.nc_transpose(None, data, engine=engine, mask=mask, dtype=dtype)


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=None, mask=None, dtype=None, **kw):
    return _act.activation(None, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
                           reduce_res=reduce_res, reduce_cmd=reduce_cmd or 0, dtype=dtype, mask=mask)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None,
                      dtype=None, **kw):
    return _act.activation_reduce(None, op, data, reduce_op=reduce_op, reduce_res=reduce_res,
                                  bias=bias, scale=scale, dtype=dtype, mask=mask)


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=None, **kw):
    return _ew.tensor_tensor(None, data1, data2, op, dtype=dtype, mask=mask, engine=engine)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *,
                  dtype=None, mask=None, engine=None, **kw):
    return _ew.tensor_scalar(None, data, op0, operand0, reverse0, op1, operand1, reverse1,
                             dtype=dtype, mask=mask, engine=engine)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         dtype=None, mask=None, **kw):
    return _ew.scalar_tensor_tensor(None, data, op0, operand0, op1, operand1, reverse0, reverse1,
                                    dtype=dtype, mask=mask)


def tensor_copy(src, *, mask=None, dtype=None, engine=None, **kw):
    return _ew.tensor_copy(None, src, dtype=dtype, mask=mask, engine=engine)


def memset(shape, value, dtype, *, mask=None, engine=None, **kw):
    from ..core.context import current
    return _ew.memset_new(current(), shape, value, dtype, mask=mask, engine=engine)


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kw):
    return _red.reduce_free(None, op, data, axis, dtype=dtype, mask=mask, negate=negate,
                            keepdims=keepdims)


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kw):
    return _red.partition_reduce(None, op, data, dtype=dtype, mask=mask)


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None,
                         mask=None, **kw):
    return _red.tensor_scalar_reduce(None, data, op0, operand0, reduce_op, reduce_res, reverse0,
                                     dtype=dtype, mask=mask)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *,
                       dtype=None, mask=None, **kw):
    return _red.tensor_tensor_scan(None, data0, data1, initial, op0, op1, reverse0, reverse1,
                                   dtype=dtype, mask=mask)


def max8(*, src, mask=None, dtype=None, **kw):
    return _red.max8(None, src, dtype=dtype, mask=mask)


def bn_stats(data, *, mask=None, dtype=None, **kw):
    return _red.bn_stats(None, data, dtype=dtype, mask=mask)


def bn_aggr(data, *, mask=None, dtype=None, **kw):
    return _red.bn_aggr(None, data, dtype=dtype, mask=mask)


def reciprocal(data, *, dtype=None, mask=None, **kw):
    """1/x on the Vector engine (more precise than the Scalar activation)."""
    from ..ops.elementwise import _tensor_scalar
    from ..ops.base import tile
    from ..core.context import current
    ctx = current()
    t = tile(ctx, data, "data", "reciprocal", "vector")
    return _tensor_scalar(ctx, None, t, [("divide", 1.0, True)],
                          dtype if dtype is not None else t.dtype, mask, "vector", "reciprocal",
                          opcode="reciprocal")


def iota(expr, dtype, *, mask=None, **kw):
    return _gp.iota_legacy(expr, dtype, mask=mask)


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kw):
    return _gp.affine_select_legacy(pred, on_true_tile, on_false_value, dtype=dtype, mask=mask)


def dropout(data, prob, *, mask=None, dtype=None, **kw):
    return _gp.dropout(None, data, prob, dtype=dtype, mask=mask)


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None, **kw):
    _dma.copy(dst, src, mask=mask, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode)


def dma_transpose(src, *, axes=None, mask=None, dtype=None, **kw):
    return _dma.dma_transpose(None, src, axes=axes, dtype=dtype, mask=mask)


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kw):
    _gp.stream_shuffle(dst, src, shuffle_mask)


def tensor_copy_predicated(*, src, dst, predicate, mask=None, reverse_pred=False, **kw):
    _gp.copy_predicated(dst, src, predicate, reverse_pred=reverse_pred, mask=mask)


def _unsupported(name):
    def f(*a, **kw):
        raise UnsupportedError(f"nisa.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    return f


for _n in ("select_reduce", "range_select", "local_gather", "nc_find_index8", "nc_match_replace8",
           "tensor_copy_dynamic_src", "tensor_copy_dynamic_dst", "sequence_bounds"):
    globals().setdefault(_n, _unsupported(_n))
