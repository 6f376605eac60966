"""``nki.isa`` (NKI >= 0.2): every instruction takes ``dst`` first, writes it in place and returns an
``NkiInstruction`` handle (``.depends_on(...)`` orders it after other instructions).

Enum parameters must be members of the enums below (plain integers are rejected, as in NKI >= 0.3);
``mask=`` no longer exists.  Each wrapper validates what is specific to the new API and hands the
work to the shared ops in ``trnsim.nki.ops``.
"""
from __future__ import annotations

import numpy as np

from ....errors import DtypeError, GenerationError, KernelError, ShapeError, UnsupportedError
from ...common import get_nc_sub_version, get_nc_version  # noqa: F401
from ...core import dtypes as _dt
from ...core.context import current as _current
from ...core.tensor import NkiTensor  # noqa: F401
from ...ops import activation as _act, dma as _dma, elementwise as _ew, gpsimd as _gp
from ...ops import newops as _new, reduce as _red, sync as _sync, tensor_engine as _te
from ...ops.base import Produced
from ...ops.base import need_tensor as _need
from ...ops.base import tile as _tile
from .._checks import NkiValidationError, enum_arg as _enum, reject_legacy_kwargs as _reject
from ..language import NKIObject, equal, maximum  # noqa: F401
from . import constants  # noqa: F401
from .constants import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode,  # noqa: F401
                        nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine,
                        unknown_engine, vector_engine)

NkiInstruction = Produced


def _handle(r) -> Produced:
    """The instruction handle of the call that just ran."""
    if isinstance(r, Produced):
        return r
    return Produced(len(_current().trace.instructions) - 1)


def _gen() -> int:
    return _current().spec.generation


def _eng(value, fname, default=engine.unknown):
    return _enum(value, engine, "engine", fname, default)


def _need_gen(gen: int, what: str) -> None:
    ctx = _current()
    if ctx.spec.generation < gen:
        raise GenerationError(f"{what} needs NeuronCore-v{gen} or newer", rule="isa-generation",
                              limit=f"gen{gen}+", value=ctx.spec.nc_version)


# -- registers -----------------------------------------------------------------------------------

class VirtualRegister(NKIObject):
    """A 32-bit engine-sequencer register (``nisa.register_alloc``): dynamic loop bounds, while
    conditions and dynamic offsets (``.ap(scalar_offset=reg)``)."""

    def __init__(self, state=None, frozen=False):
        self.value = None if state is None else _wrap32(state)
        self.frozen = bool(frozen)

    def _trnsim_register_value(self) -> int:
        if self.value is None:
            raise KernelError("a register was read before any value was moved or loaded into it",
                              rule="register-uninitialized", value="register_alloc()")
        return self.value

    def _set(self, v) -> None:
        self.value = _wrap32(v)

    def __index__(self) -> int:
        return self._trnsim_register_value()

    __int__ = __index__

    def __bool__(self) -> bool:  # ``while reg:`` (deprecated but simulated)
        return self._trnsim_register_value() != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"

    def _no_host_math(self, *_):
        from ....source import describe, user_loc
        raise KernelError("a VirtualRegister holds a device value: Python arithmetic and ordering "
                          "on it are not traced (in NKI they raise TypeError)",
                          rule="register-host-arithmetic", value=repr(self),
                          where=describe(user_loc()),
                          hint="pass it as .ap(scalar_offset=reg) / nl.ds(reg, n) / a loop bound, "
                               "or compute on a 1x1 SBUF tensor and register_load the result")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_host_math
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = _no_host_math
    __mod__ = __rmod__ = __neg__ = _no_host_math
    __lt__ = __le__ = __gt__ = __ge__ = _no_host_math


def _wrap32(v) -> int:
    v = int(v)
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _reg(x, fname: str) -> VirtualRegister:
    if not isinstance(x, VirtualRegister):
        raise KernelError(f"{fname}: expected a VirtualRegister from nisa.register_alloc(), got "
                          f"{type(x).__name__}", rule="register-type", value=type(x).__name__)
    return x


def register_alloc(x=None) -> VirtualRegister:
    """A new register, optionally holding the integer ``x``."""
    if x is not None and not isinstance(x, (int, np.integer)):
        raise KernelError("register_alloc takes None or an integer", rule="register-type",
                          value=type(x).__name__)
    return VirtualRegister(x)


def register_move(dst, src) -> None:
    """dst <- an integer constant or another register's value."""
    d = _reg(dst, "register_move")
    if isinstance(src, VirtualRegister):
        d._set(src._trnsim_register_value())
    elif isinstance(src, (int, np.integer)) and not isinstance(src, bool):
        d._set(src)
    else:
        raise KernelError("register_move source must be an integer or a register",
                          rule="register-type", value=type(src).__name__)
    _current().record("sync", "register_move", [], [], 1, 1, "int32", "int32")


def register_load(dst, src) -> None:
    """dst <- the single value of a 1-element HBM/SBUF tensor."""
    _new.register_load(_reg(dst, "register_load"), src)


def register_store(dst, src) -> Produced:
    """The register's value -> a 1-element HBM/SBUF tensor."""
    return _handle(_new.register_store(dst, _reg(src, "register_store")._trnsim_register_value()))


# -- data movement ---------------------------------------------------------------------------

def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None, **kw):
    """dst = src through the DMA engines (HBM/SBUF, element counts equal, casts via fp32)."""
    _reject(kw, "nisa.dma_copy")
    om = _enum(oob_mode, constants.oob_mode, "oob_mode", "dma_copy", constants.oob_mode.error)
    dg = _enum(dge_mode, constants.dge_mode, "dge_mode", "dma_copy", constants.dge_mode.unknown)
    eng = _eng(engine, "dma_copy")
    _priority(priority, "dma_copy")
    d, s = _need(dst, "dst", "dma_copy"), _need(src, "src", "dma_copy")
    if dg == constants.dge_mode.hwdge:
        _need_gen(3, "dma_copy with dge_mode.hwdge")
        if d.dtype != s.dtype:
            raise DtypeError("dma_copy: hardware DGE cannot convert dtypes "
                             f"({_dt.name(s.dtype)} -> {_dt.name(d.dtype)})", rule="hwdge-dtype",
                             limit="src.dtype == dst.dtype", value=(_dt.name(s.dtype),
                                                                    _dt.name(d.dtype)))
    attrs = (("dge_mode", dg.name),) + ((("queue_engine", eng.name),) if eng.value else ())
    return _handle(_dma.copy(d, s, oob_mode=om, attrs=attrs))


def _priority(priority, fname):
    if priority is None:
        return
    if not isinstance(priority, (int, np.integer)) or not 0 <= int(priority) <= 3:
        raise NkiValidationError(f"{fname}: priority must be an integer 0..3", rule="dma-priority",
                                 limit="0..3", value=repr(priority))


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None, **kw):
    """Transpose through the DMA: axes (1,0), (2,1,0) or (3,1,2,0); dst = permuted src shape."""
    _reject(kw, "nisa.dma_transpose")
    dg = _enum(dge_mode, constants.dge_mode, "dge_mode", "dma_transpose",
               constants.dge_mode.unknown)
    _enum(oob_mode, constants.oob_mode, "oob_mode", "dma_transpose", constants.oob_mode.error)
    _priority(priority, "dma_transpose")
    d, s = _need(dst, "dst", "dma_transpose"), _need(src, "src", "dma_transpose")
    if dg == constants.dge_mode.none:
        raise NkiValidationError("dma_transpose: dge_mode must be unknown, hwdge or swdge",
                                 rule="dma-transpose-dge", limit="unknown/hwdge/swdge",
                                 value=dg.name)
    if d.ndim != s.ndim:
        raise ShapeError(f"dma_transpose: dst rank {d.ndim} differs from src rank {s.ndim}",
                         rule="dma-transpose-rank", limit=s.ndim, value=d.ndim)
    if d.dtype != s.dtype:
        raise DtypeError("dma_transpose: src and dst must have the same dtype", rule="dma-transpose-dtype",
                         limit=_dt.name(s.dtype), value=_dt.name(d.dtype))
    if dg == constants.dge_mode.hwdge:
        _need_gen(3, "dma_transpose with dge_mode.hwdge")
        if s.itemsize != 2:
            raise DtypeError("dma_transpose: hardware DGE transposes 2-byte dtypes only",
                             rule="dma-transpose-dtype", limit="2-byte dtype",
                             value=_dt.name(s.dtype))
    return _handle(_dma.dma_transpose(d, s, axes=axes))


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error,
                name=None, **kw):
    """dst = reduce_op over the (scaled) srcs, computed inside the DMA engines."""
    _reject(kw, "nisa.dma_compute")
    _enum(oob_mode, constants.oob_mode, "oob_mode", "dma_compute", constants.oob_mode.error)
    return _handle(_dma.dma_compute(dst, list(srcs), reduce_op, scales=scales))


def tensor_copy(dst, src, engine=engine.unknown, name=None, **kw):
    """Copy on Vector/Scalar/GpSimd: bit-exact when dtypes match, else through fp32."""
    _reject(kw, "nisa.tensor_copy")
    eng = _eng(engine, "tensor_copy")
    if eng == constants.engine.scalar and _gen() == 2:
        raise GenerationError("tensor_copy cannot run on the Scalar engine of NeuronCore-v2; use "
                              "nisa.activation(op=nl.copy)", rule="tensor-copy-scalar-gen2",
                              limit="vector or gpsimd on gen2", value="engine.scalar")
    if eng not in (constants.engine.unknown, constants.engine.vector, constants.engine.scalar,
                   constants.engine.gpsimd):
        raise NkiValidationError(f"tensor_copy runs on Vector, Scalar or GpSimd, not {eng.name}",
                                 rule="tensor-copy-engine", limit="vector/scalar/gpsimd",
                                 value=eng.name)
    d = _need(dst, "dst", "tensor_copy")
    return _handle(_ew.tensor_copy(d, src, engine=eng))


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None, **kw):
    """Copy ``src`` (tile or scalar) into ``dst`` where ``predicate`` is nonzero."""
    _reject(kw, "nisa.tensor_copy_predicated")
    return _handle(_gp.copy_predicated(_need(dst, "dst", "tensor_copy_predicated"), src, predicate,
                                       reverse_pred=bool(reverse_pred)))


def memset(dst, value, engine=engine.unknown, name=None, **kw):
    """Fill ``dst`` with a constant (int literal for integer dst; only 0 for x4-packed dtypes)."""
    _reject(kw, "nisa.memset")
    eng = _eng(engine, "memset")
    if eng not in (constants.engine.unknown, constants.engine.vector, constants.engine.gpsimd):
        raise NkiValidationError(f"memset runs on Vector or GpSimd, not {eng.name}",
                                 rule="memset-engine", limit="vector/gpsimd", value=eng.name)
    d = _need(dst, "dst", "memset")
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise NkiValidationError(f"memset value must be a number, got {type(value).__name__}",
                                 rule="memset-value", value=repr(value))
    if _dt.is_packed(d.dtype) and value != 0:
        raise NkiValidationError(f"memset of x4-packed {_dt.name(d.dtype)} supports only value=0",
                                 rule="memset-packed-value", limit=0, value=value)
    if _dt.is_int(d.dtype) and not isinstance(value, (int, np.integer)) and \
            not (np.isfinite(value) and float(value).is_integer()):
        # nki-library memsets integer tiles with 0.0; a fractional or non-finite value has no
        # integer meaning
        raise NkiValidationError(f"memset of integer dst '{d.name}' ({_dt.name(d.dtype)}) needs an "
                                 f"integer value, got {value!r}", rule="memset-value-dtype",
                                 limit="an integer", value=repr(value))
    if _dt.is_int(d.dtype):
        value = int(value)
    return _handle(_ew.memset_new(_current(), None, value, None, engine=eng, dst=d))


# -- Tensor engine -------------------------------------------------------------------------------

def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None, **kw):
    """dst (PSUM) = stationary.T @ moving; accumulate=None overwrites the first write to each PSUM
    location since allocation and adds afterwards, True/False force add/overwrite."""
    _reject(kw, "nisa.nc_matmul")
    pm = _enum(perf_mode, matmul_perf_mode, "perf_mode", "nc_matmul", matmul_perf_mode.none)
    if accumulate not in (None, True, False) and not isinstance(accumulate, (bool, np.bool_)):
        raise NkiValidationError("nc_matmul accumulate must be None, True or False",
                                 rule="matmul-accumulate", value=repr(accumulate))
    acc = None if accumulate is None else bool(accumulate)
    d = _need(dst, "dst", "nc_matmul")
    return _handle(_te.nc_matmul(d, stationary, moving,
                                 is_stationary_onezero=is_stationary_onezero,
                                 is_moving_onezero=is_moving_onezero, is_transpose=is_transpose,
                                 tile_position=tuple(tile_position or ()),
                                 tile_size=tuple(tile_size or ()),
                                 perf_mode=None if pm == matmul_perf_mode.none else pm,
                                 accumulate=acc))


def nc_transpose(dst, data, engine=engine.unknown, name=None, **kw):
    """Swap partition and flattened free axes: Tensor engine (<=128x128, into PSUM) or Vector
    (<=32x32); unknown picks by where ``dst`` lives."""
    _reject(kw, "nisa.nc_transpose")
    eng = _eng(engine, "nc_transpose")
    d = _need(dst, "dst", "nc_transpose")
    if eng == constants.engine.unknown:
        eng = constants.engine.tensor if d._st.memory == "psum" else constants.engine.vector
    return _handle(_te.nc_transpose(d, data, engine=eng))


def _mx():
    try:
        from ...ops import mx
    except ModuleNotFoundError as e:
        if e.name and e.name.endswith("ops.mx"):
            raise UnsupportedError("MX (microscaling) instructions are not available in this trnsim "
                                   "build", rule="unsupported-api", value="nc_matmul_mx/quantize_mx"
                                   ) from None
        raise
    return mx


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None, **kw):
    """MXFP8/MXFP4 matmul with dequantization (NeuronCore-v4)."""
    _reject(kw, "nisa.nc_matmul_mx")
    mx = _mx()
    f = getattr(mx, "nc_matmul_mx", None)
    if f is None:
        raise UnsupportedError("nisa.nc_matmul_mx is not modelled by trnsim yet",
                               rule="unsupported-api", value="nc_matmul_mx")
    return _handle(f(dst, stationary, moving, stationary_scale, moving_scale,
                     tile_position=tile_position, tile_size=tile_size, accumulate=accumulate))


def quantize_mx(dst, src, dst_scale, name=None, **kw):
    """fp16/bf16 -> MXFP8 data (x4 packed) + e8m0 scales (NeuronCore-v4)."""
    _reject(kw, "nisa.quantize_mx")
    mx = _mx()
    f = getattr(mx, "quantize_mx", None)
    if f is None:
        raise UnsupportedError("nisa.quantize_mx is not modelled by trnsim yet",
                               rule="unsupported-api", value="quantize_mx")
    return _handle(f(dst, src, dst_scale))


# -- Vector / Scalar / GpSimd --------------------------------------------------------------------

def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None, **kw):
    """dst = data1 op data2 (same partitions and elements per partition)."""
    _reject(kw, "nisa.tensor_tensor")
    eng = _eng(engine, "tensor_tensor")
    return _handle(_ew.tensor_tensor(_need(dst, "dst", "tensor_tensor"), data1, data2, op,
                                     engine=eng))


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=engine.unknown, name=None, **kw):
    """dst = (data op0 operand0) op1 operand1 with scalar or (P, 1) operands."""
    _reject(kw, "nisa.tensor_scalar")
    eng = _eng(engine, "tensor_scalar")
    return _handle(_ew.tensor_scalar(_need(dst, "dst", "tensor_scalar"), data, op0, operand0,
                                     bool(reverse0), op1, operand1, bool(reverse1), engine=eng))


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         name=None, **kw):
    """dst = (data op0 operand0) op1 operand1 with operand1 a tile like data."""
    _reject(kw, "nisa.scalar_tensor_tensor")
    return _handle(_ew.scalar_tensor_tensor(_need(dst, "dst", "scalar_tensor_tensor"), data, op0,
                                            operand0, op1, operand1, bool(reverse0),
                                            bool(reverse1)))


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None, **kw):
    """dst = op(data * scale + bias) on the Scalar engine, with the accumulator registers steered
    by ``reduce_cmd`` and read out into ``reduce_res``."""
    _reject(kw, "nisa.activation")
    cmd = _enum(reduce_cmd, constants.reduce_cmd, "reduce_cmd", "activation",
                constants.reduce_cmd.idle)
    return _handle(_act.activation(_need(dst, "dst", "activation"), op, data, bias=bias,
                                   scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                                   reduce_cmd=cmd))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None, **kw):
    """activation + a free-axis reduction into ``reduce_res`` (reduce_cmd reset_reduce)."""
    _reject(kw, "nisa.activation_reduce")
    return _handle(_act.activation_reduce(_need(dst, "dst", "activation_reduce"), op, data,
                                          reduce_op=reduce_op, reduce_res=reduce_res, bias=bias,
                                          scale=scale))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None, **kw):
    """Reduce the trailing free axes ``axis`` of ``data`` into ``dst`` (fp32 math)."""
    _reject(kw, "nisa.tensor_reduce")
    return _handle(_red.reduce_free(_need(dst, "dst", "tensor_reduce"), op, data, axis,
                                    negate=bool(negate), keepdims=bool(keepdims)))


def tensor_partition_reduce(dst, op, data, name=None, **kw):
    """Reduce across partitions (GpSimd)."""
    _reject(kw, "nisa.tensor_partition_reduce")
    return _handle(_red.partition_reduce(_need(dst, "dst", "tensor_partition_reduce"), op, data))


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None,
                         reduce_res_negate=False, name=None, **kw):
    """dst = data op0 operand0, reduced over the free axes into the Vector accumulator."""
    _reject(kw, "nisa.tensor_scalar_reduce")
    cmd = _enum(reduce_cmd, constants.reduce_cmd, "reduce_cmd", "tensor_scalar_reduce",
                constants.reduce_cmd.reset_reduce)
    if cmd == constants.reduce_cmd.load_reduce and reduce_init is None:
        raise NkiValidationError("tensor_scalar_reduce: reduce_cmd.load_reduce needs reduce_init",
                                 rule="reduce-init", value="reduce_init=None")
    return _handle(_red.tensor_scalar_reduce(_need(dst, "dst", "tensor_scalar_reduce"), data, op0,
                                             operand0, reduce_op, reduce_res, bool(reverse0),
                                             reduce_cmd=cmd, reduce_init=reduce_init,
                                             reduce_res_negate=bool(reduce_res_negate)))


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None, **kw):
    """Running ``reg = op1(op0(src[i], imm0), reg)`` per partition; dst[i] = reg."""
    _reject(kw, "nisa.tensor_scalar_cumulative")
    cmd = _enum(reduce_cmd, constants.reduce_cmd, "reduce_cmd", "tensor_scalar_cumulative",
                constants.reduce_cmd.reset_reduce)
    return _handle(_new.tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1, cmd))


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None, **kw):
    """Per partition: r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial."""
    _reject(kw, "nisa.tensor_tensor_scan")
    return _handle(_red.tensor_tensor_scan(_need(dst, "dst", "tensor_tensor_scan"), data0, data1,
                                           initial, op0, op1, bool(reverse0), bool(reverse1)))


def reciprocal(dst, data, name=None, **kw):
    """dst = 1 / data on the Vector engine."""
    _reject(kw, "nisa.reciprocal")
    from ...ops.elementwise import _tensor_scalar
    ctx = _current()
    d = _need(dst, "dst", "reciprocal")
    t = _tile(ctx, data, "data", "reciprocal", "vector")
    return _handle(_tensor_scalar(ctx, d, t, [("divide", 1.0, True)], d.dtype, None, "vector",
                                  "reciprocal", opcode="reciprocal"))


def max8(dst, src, name=None, **kw):
    """The 8 largest values per partition, descending."""
    _reject(kw, "nisa.max8")
    return _handle(_red.max8(_need(dst, "dst", "max8"), src))


def bn_stats(dst, data, name=None, **kw):
    _reject(kw, "nisa.bn_stats")
    return _handle(_red.bn_stats(_need(dst, "dst", "bn_stats"), data))


def bn_aggr(dst, data, name=None, **kw):
    _reject(kw, "nisa.bn_aggr")
    return _handle(_red.bn_aggr(_need(dst, "dst", "bn_aggr"), data))


def dropout(dst, data, prob, name=None, **kw):
    _reject(kw, "nisa.dropout")
    return _handle(_gp.dropout(_need(dst, "dst", "dropout"), data, prob))


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None, **kw):
    """dst[p, ...] = offset + p * channel_multiplier + sum(step_i * idx_i) (int32 math)."""
    _reject(kw, "nisa.iota")
    return _handle(_gp.iota_new(_need(dst, "dst", "iota"), pattern, offset, channel_multiplier))


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=equal,
                  offset=0, name=None, **kw):
    """dst = on_true_tile where cmp_op(affine value, 0) holds, else on_false_value."""
    _reject(kw, "nisa.affine_select")
    return _handle(_gp.affine_select_new(_need(dst, "dst", "affine_select"), pattern,
                                         channel_multiplier, on_true_tile, on_false_value,
                                         cmp_op=cmp_op, offset=offset))


def nc_stream_shuffle(dst, src, shuffle_mask, name=None, **kw):
    """Move partitions within each 32-partition quadrant: dst[i] = src[shuffle_mask[i]]."""
    _reject(kw, "nisa.nc_stream_shuffle")
    return _handle(_gp.stream_shuffle(_need(dst, "dst", "nc_stream_shuffle"), src, shuffle_mask))


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=maximum, reverse_pred=False, name=None, **kw):
    _reject(kw, "nisa.select_reduce")
    cmd = _enum(reduce_cmd, constants.reduce_cmd, "reduce_cmd", "select_reduce",
                constants.reduce_cmd.idle)
    return _handle(_new.select_reduce(dst, predicate, on_true, on_false, reduce_res, cmd,
                                      reduce_op, bool(reverse_pred)))


select_reduce.__doc__ = _new.select_reduce.__doc__


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=reduce_cmd.reset_reduce, reduce_res=None, reduce_op=maximum,
                 range_start=0, on_false_value=_new.FP32_MIN, name=None, **kw):
    _reject(kw, "nisa.range_select")
    cmd = _enum(reduce_cmd, constants.reduce_cmd, "reduce_cmd", "range_select",
                constants.reduce_cmd.reset_reduce)
    return _handle(_new.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, cmd,
                                     reduce_res, reduce_op, range_start, on_false_value))


range_select.__doc__ = _new.range_select.__doc__


def nc_find_index8(dst, data, vals, name=None, **kw):
    _reject(kw, "nisa.nc_find_index8")
    return _handle(_new.nc_find_index8(dst, data, vals))


nc_find_index8.__doc__ = _new.nc_find_index8.__doc__


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None, **kw):
    _reject(kw, "nisa.nc_match_replace8")
    return _handle(_new.nc_match_replace8(dst, data, vals, imm, dst_idx))


nc_match_replace8.__doc__ = _new.nc_match_replace8.__doc__


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None,
                 **kw):
    _reject(kw, "nisa.local_gather")
    return _handle(_new.local_gather(dst, src_buffer, index, num_elem_per_idx, num_valid_indices))


local_gather.__doc__ = _new.local_gather.__doc__


def nc_n_gather(dst, data, indices, name=None, **kw):
    _reject(kw, "nisa.nc_n_gather")
    return _handle(_new.nc_n_gather(_need(dst, "dst", "nc_n_gather"), data, indices))


nc_n_gather.__doc__ = _new.nc_n_gather.__doc__


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None, **kw):
    _reject(kw, "nisa.nonzero_with_count")
    return _handle(_new.nonzero_with_count(dst, src, index_offset, padding_val))


nonzero_with_count.__doc__ = _new.nonzero_with_count.__doc__


def sequence_bounds(dst, segment_ids, name=None, **kw):
    _reject(kw, "nisa.sequence_bounds")
    return _handle(_new.sequence_bounds(dst, segment_ids))


sequence_bounds.__doc__ = _new.sequence_bounds.__doc__


# -- cross-core ----------------------------------------------------------------------------------

def core_barrier(data, cores, engine=engine.gpsimd, name=None, **kw):
    """Wait until both logical cores of an LNC=2 launch reach this point (gen3+)."""
    _reject(kw, "nisa.core_barrier")
    eng = _eng(engine, "core_barrier", constants.engine.gpsimd)
    cores = tuple(int(c) for c in cores)
    if cores != (0, 1):
        raise NkiValidationError("core_barrier supports only cores=(0, 1)", rule="core-barrier-cores",
                                 limit=(0, 1), value=cores)
    _sync.core_barrier(data, cores, engine=eng)
    return _handle(None)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma,
             name=None, **kw):
    """Send ``src`` to the peer core's ``dst`` while receiving the peer's ``src`` into ``dst``."""
    _reject(kw, "nisa.sendrecv")
    de = _enum(dma_engine, constants.dma_engine, "dma_engine", "sendrecv",
               constants.dma_engine.dma)
    _need_gen(3, "sendrecv")
    s, d = _need(src, "src", "sendrecv"), _need(dst, "dst", "sendrecv")
    if s.dtype != d.dtype or s.shape[0] != d.shape[0] or s.size != d.size:
        raise ShapeError("sendrecv: src and dst need the same dtype, partitions and elements",
                         rule="sendrecv-shape", limit=(tuple(s.shape), _dt.name(s.dtype)),
                         value=(tuple(d.shape), _dt.name(d.dtype)))
    for r in (send_to_rank, recv_from_rank):
        if int(r) not in (0, 1):
            raise NkiValidationError("sendrecv ranks must be 0 or 1 (the two cores of an LNC=2 "
                                     "launch)", rule="sendrecv-rank", limit="0 or 1", value=int(r))
    _sync.sendrecv(s, d, int(send_to_rank), int(recv_from_rank), int(pipe_id), dma_engine=de)
    return _handle(None)


# -- not modelled yet (named, never approximated) ------------------------------------------------

def _unsupported(name):
    def f(*a, **kw):
        raise UnsupportedError(f"nisa.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    f.__doc__ = f"``nisa.{name}``: not modelled (raises UnsupportedError)."
    return f


activate2 = _unsupported("activate2")
rng = _unsupported("rng")
set_rng_seed = _unsupported("set_rng_seed")
rand_set_state = _unsupported("rand_set_state")
rand_get_state = _unsupported("rand_get_state")
rand2 = _unsupported("rand2")
exponential = _unsupported("exponential")
topk = _unsupported("topk")
