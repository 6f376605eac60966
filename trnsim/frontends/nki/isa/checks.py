"""What some ``nki.isa`` calls check beyond the shared wrapper (``_signature``): rules of the new
API's argument conventions, then the call into the instruction semantics (``trnsim.nki.ops``).
Each function gets its arguments already converted (enums are members, ``dst`` is a tensor)."""
from __future__ import annotations

import numpy as np

from ....errors import DtypeError, ShapeError
from ....source import describe, user_loc
from ....nki.core import dtypes as _dt, gates as _gates
from ....nki.core.alu import BINARY, token_name
from ....nki.core.context import current as _current
from ....nki.ops import dma as _dma, elementwise as _ew, gather as _ga, matmul as _te
from ....nki.ops import reduce as _red, sync as _sync
from ....nki.ops.base import need_tensor as _need
from .._checks import NkiValidationError, reject_legacy_kwargs as _reject_legacy
from . import constants as C

#: the new API's tensor_copy signature, which has no dtype= (SDK 2.28.1 docs and later)
TENSOR_COPY_DOC = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/nki/api/generated/"
                   "nki.isa.tensor_copy.html")
#: the legacy neuronxcc.nki signature that did take dtype= (SDK 2.26.1 docs)
TENSOR_COPY_LEGACY_DOC = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/"
                          "generated/nki.isa.tensor_copy.html")


def reject_kwargs(kw: dict, fname: str) -> None:
    """Unknown keywords of a new-API call; ``tensor_copy(dtype=)`` gets the documented reason."""
    if fname == "nisa.tensor_copy" and "dtype" in kw and "mask" not in kw:
        # nki-samples' matmul tutorial (8370e11) writes tensor_copy(dst=, src=, dtype=): a mix of
        # the two APIs. The new API converts to dst.dtype (through fp32 when the dtypes differ);
        # only the legacy tensor_copy(src, *, mask=None, dtype=None, ...) returned a new tile.
        raise NkiValidationError(
            "nisa.tensor_copy() takes no dtype= in the new NKI API: its signature is "
            f"tensor_copy(dst, src, engine=engine.unknown, name=None) ({TENSOR_COPY_DOC}); the "
            "copy converts to dst.dtype. dtype= belongs to the legacy neuronxcc.nki.isa."
            f"tensor_copy(src, *, mask=None, dtype=None, engine=...) ({TENSOR_COPY_LEGACY_DOC})",
            rule="new-api-keyword", limit="dst, src, engine, name",
            value=f"dtype={_spell(kw['dtype'])}",
            hint="drop dtype= and allocate dst with the dtype you want", where=describe(user_loc()))
    _reject_legacy(kw, fname)


def _spell(d) -> str:
    """The NKI name of a dtype argument, or the argument as written when it names none."""
    try:
        return _dt.name(_dt.as_dtype(d))
    except Exception:  # an unknown spelling is reported as written
        return repr(d)


def _priority(priority, fname: str) -> None:
    if priority is None:
        return
    if not isinstance(priority, (int, np.integer)) or not 0 <= int(priority) <= 3:
        raise NkiValidationError(f"{fname}: priority must be an integer 0..3", rule="dma-priority",
                                 limit="0..3", value=repr(priority))


def dma_copy(dst, src, priority, oob_mode, dge_mode, engine):
    """dst = src through the DMA queues; hardware DGE (gen3+) cannot convert dtypes."""
    _priority(priority, "dma_copy")
    s = _need(src, "src", "dma_copy")
    if dge_mode == C.dge_mode.hwdge:
        _gates.require(_current(), "dma.hwdge")
        if dst.dtype != s.dtype:
            raise DtypeError("dma_copy: hardware DGE cannot convert dtypes "
                             f"({_dt.name(s.dtype)} -> {_dt.name(dst.dtype)})", rule="hwdge-dtype",
                             limit="src.dtype == dst.dtype", value=(_dt.name(s.dtype),
                                                                    _dt.name(dst.dtype)))
    attrs = (("dge_mode", dge_mode.name),) + \
        ((("queue_engine", engine.name),) if engine.value else ())
    return _dma.copy(dst, s, oob_mode=oob_mode, attrs=attrs)


def dma_transpose(dst, src, axes, priority, dge_mode):
    """Transpose through the DMA: same rank and dtype; hardware DGE transposes 2-byte dtypes."""
    _priority(priority, "dma_transpose")
    s = _need(src, "src", "dma_transpose")
    if dge_mode == C.dge_mode.none:
        raise NkiValidationError("dma_transpose: dge_mode must be unknown, hwdge or swdge",
                                 rule="dma-transpose-dge", limit="unknown/hwdge/swdge",
                                 value=dge_mode.name)
    if dst.ndim != s.ndim:
        raise ShapeError(f"dma_transpose: dst rank {dst.ndim} differs from src rank {s.ndim}",
                         rule="dma-transpose-rank", limit=s.ndim, value=dst.ndim)
    if dst.dtype != s.dtype:
        raise DtypeError("dma_transpose: src and dst must have the same dtype",
                         rule="dma-transpose-dtype", limit=_dt.name(s.dtype),
                         value=_dt.name(dst.dtype))
    if dge_mode == C.dge_mode.hwdge:
        _gates.require(_current(), "dma.hwdge")
        if s.itemsize != 2:
            raise DtypeError("dma_transpose: hardware DGE transposes 2-byte dtypes only",
                             rule="dma-transpose-dtype", limit="2-byte dtype",
                             value=_dt.name(s.dtype))
    return _dma.dma_transpose(dst, s, axes=axes)


def tensor_copy(dst, src, engine):
    """Copy on Vector, Scalar (gen3+) or GpSimd."""
    if engine == C.engine.scalar:
        _gates.require(_current(), "tensor_copy.engine.scalar")  # v2: activation(op=nl.copy)
    if engine not in (C.engine.unknown, C.engine.vector, C.engine.scalar, C.engine.gpsimd):
        raise NkiValidationError(f"tensor_copy runs on Vector, Scalar or GpSimd, not {engine.name}",
                                 rule="tensor-copy-engine", limit="vector/scalar/gpsimd",
                                 value=engine.name)
    return _ew.tensor_copy(dst, src, engine=engine)


def memset(dst, value, engine):
    """Fill on Vector or GpSimd: a number (an integer for integer dst, only 0 for x4 dtypes)."""
    if engine not in (C.engine.unknown, C.engine.vector, C.engine.gpsimd):
        raise NkiValidationError(f"memset runs on Vector or GpSimd, not {engine.name}",
                                 rule="memset-engine", limit="vector/gpsimd", value=engine.name)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise NkiValidationError(f"memset value must be a number, got {type(value).__name__}",
                                 rule="memset-value", value=repr(value))
    if _dt.is_packed(dst.dtype) and value != 0:
        raise NkiValidationError(f"memset of x4-packed {_dt.name(dst.dtype)} supports only value=0",
                                 rule="memset-packed-value", limit=0, value=value)
    if _dt.is_int(dst.dtype) and not isinstance(value, (int, np.integer)) and \
            not (np.isfinite(value) and float(value).is_integer()):
        # nki-library memsets integer tiles with 0.0; a fractional or non-finite value has no
        # integer meaning
        raise NkiValidationError(f"memset of integer dst '{dst.name}' ({_dt.name(dst.dtype)}) needs "
                                 f"an integer value, got {value!r}", rule="memset-value-dtype",
                                 limit="an integer", value=repr(value))
    if _dt.is_int(dst.dtype):
        value = int(value)
    return _ew.memset(_current(), None, value, None, engine=engine, dst=dst)


def nc_matmul(dst, stationary, moving, is_stationary_onezero, is_moving_onezero, is_transpose,
              accumulate, tile_position, tile_size, perf_mode):
    """nc_matmul with accumulate None / True / False and perf_mode none meaning the default."""
    if accumulate not in (None, True, False) and not isinstance(accumulate, (bool, np.bool_)):
        raise NkiValidationError("nc_matmul accumulate must be None, True or False",
                                 rule="matmul-accumulate", value=repr(accumulate))
    return _te.nc_matmul(dst, stationary, moving, is_stationary_onezero=is_stationary_onezero,
                         is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                         tile_position=tuple(tile_position or ()), tile_size=tuple(tile_size or ()),
                         perf_mode=None if perf_mode == C.matmul_perf_mode.none else perf_mode,
                         accumulate=None if accumulate is None else bool(accumulate))


def nc_transpose(dst, data, engine):
    """Tensor engine into PSUM, Vector otherwise: engine unknown picks by where ``dst`` lives."""
    if engine == C.engine.unknown:
        engine = C.engine.tensor if dst._st.memory == "psum" else C.engine.vector
    return _te.nc_transpose(dst, data, engine=engine)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0, reduce_cmd,
                         reduce_init, reduce_res_negate):
    """tensor_scalar_reduce; reduce_cmd.load_reduce needs ``reduce_init``."""
    if reduce_cmd == C.reduce_cmd.load_reduce and reduce_init is None:
        raise NkiValidationError("tensor_scalar_reduce: reduce_cmd.load_reduce needs reduce_init",
                                 rule="reduce-init", value="reduce_init=None")
    return _red.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res,
                                     bool(reverse0), reduce_cmd=reduce_cmd,
                                     reduce_init=reduce_init,
                                     reduce_res_negate=bool(reduce_res_negate))


def iota_values(dst, pattern, offset, channel_multiplier) -> np.ndarray:
    """The new API's iota: an access pattern over ``dst``'s partitions."""
    return _ga.pattern_values(pattern, offset, channel_multiplier, dst.shape[0])


def pattern_predicate(pattern, offset, channel_multiplier, cmp_op):
    """affine_select's condition ``cmp_op(offset + p*channel_multiplier + pattern, 0)`` as a
    function of the tile's shape."""
    def holds(shape) -> np.ndarray:
        v = _ga.pattern_values(pattern, offset, channel_multiplier, shape[0])
        size = int(np.prod(shape))
        if v.size != size:
            raise ShapeError("affine_select pattern does not cover the tile", rule="pattern-size",
                             limit=size, value=v.size, where=describe(user_loc()))
        op = token_name(cmp_op, "cmp_op") if cmp_op is not None else "equal"
        return BINARY[op](v.astype(np.float32), np.float32(0)).reshape(shape) != 0
    return holds


def core_barrier(data, cores, engine):
    """Both logical cores of an LNC=2 launch meet here; only cores=(0, 1) exist."""
    cores = tuple(int(c) for c in cores)
    if cores != (0, 1):
        raise NkiValidationError("core_barrier supports only cores=(0, 1)",
                                 rule="core-barrier-cores", limit=(0, 1), value=cores)
    _sync.core_barrier(data, cores, engine=engine)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine):
    """Exchange ``src``/``dst`` with the peer core (gen3+): same dtype, partitions, elements."""
    _gates.require(_current(), "sendrecv")
    if src.dtype != dst.dtype or src.shape[0] != dst.shape[0] or src.size != dst.size:
        raise ShapeError("sendrecv: src and dst need the same dtype, partitions and elements",
                         rule="sendrecv-shape", limit=(tuple(src.shape), _dt.name(src.dtype)),
                         value=(tuple(dst.shape), _dt.name(dst.dtype)))
    for r in (send_to_rank, recv_from_rank):
        if int(r) not in (0, 1):
            raise NkiValidationError("sendrecv ranks must be 0 or 1 (the two cores of an LNC=2 "
                                     "launch)", rule="sendrecv-rank", limit="0 or 1", value=int(r))
    _sync.sendrecv(src, dst, int(send_to_rank), int(recv_from_rank), int(pipe_id),
                   dma_engine=dma_engine)
