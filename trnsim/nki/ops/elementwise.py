"""Elementwise ALU instructions: tensor_tensor, tensor_scalar, scalar_tensor_tensor, tensor_copy,
memset, select, and the ``nl.*`` arithmetic functions and tile operators built on them.

Vector/Scalar/GpSimd compute in fp32 and cast on write [ARCH2]; bitwise ops act on integer bits;
integer add/sub/mul between integer tiles run exactly on GpSimd.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...errors import KernelError, MemoryAccessError, ShapeError
from ..core import dtypes as dt, fastpath, gates
from ..core.alu import BINARY, BITVEC, TS_UNARY_BITVEC, UNARY, is_bitvec, token_name  # noqa: F401
from ..core.broadcast_lowering import lower_implicit
from ..core.context import current
from ..core.index_exprs import _IndexBase
from ..core.tensor import NkiTensor
from . import base, hot_update
from .base import emit, f32, op_mask, read, tile, where
from .operands import register_stage_copy

_BF16 = dt.bfloat16
_INT_EXACT = frozenset(["add", "subtract", "multiply", "maximum", "minimum", "mod"])
# np.generic covers ml_dtypes scalars (ml_dtypes.bfloat16(1.0) is not an np.floating)
_SCALARS = (int, float, np.integer, np.floating, bool, np.bool_, np.generic)


def _is_scalar(x) -> bool:
    return isinstance(x, _SCALARS)


# Unary operators of the ALU table (nki.api.shared.rst, tbl-aluop): ``tensor_scalar`` and
# ``tensor_scalar_reduce`` take them as op0/op1 with the operand ``None`` or ``0`` (ISA docs).
TS_UNARY_ARITH = frozenset(["abs", "square", "relu", "rsqrt", "reciprocal"])
TS_UNARY = TS_UNARY_ARITH | TS_UNARY_BITVEC
# release notes 2.32 (NKI 0.6): "square and relu are now accepted as op0 on trn3" -- new opcodes
# of tensor_scalar/tensor_scalar_reduce, so earlier generations reject them in either position
_TS_UNARY_GEN4 = frozenset(["square", "relu"])


def check_ts_op(ctx, name: str, operand, opname: str, role: str, *, bitvec_ok: bool = True) -> None:
    """``name`` (a canonical op name) is usable as a tensor_scalar-style ALU op; a unary one needs
    its operand to be None or 0 and, for square/relu, NeuronCore-v4."""
    if name not in BINARY and name not in TS_UNARY:
        allowed = sorted(set(BINARY) - {"rsqrt_mul"} | TS_UNARY)
        raise KernelError(f"{opname}: {role}={name} is not an ALU operator (activation functions "
                          "such as exp run through nisa.activation)", rule=f"{opname}-op",
                          limit=", ".join(allowed), value=name, where=where())
    if not bitvec_ok and is_bitvec(name):
        raise KernelError(f"{opname}: {role} must be an arithmetic operator, got bitvec {name}",
                          rule=f"{opname}-op", limit="arithmetic ALU operators", value=name,
                          where=where())
    if name not in TS_UNARY:
        return
    arg = "operand" + role[-1]
    if operand is not None and not (_is_scalar(operand) and not isinstance(operand, (bool, np.bool_))
                                    and float(operand) == 0):
        shown = f"a {type(operand).__name__}" if isinstance(operand, NkiTensor) else repr(operand)
        raise KernelError(f"{opname}: {role}={name} is unary; {arg} must be None or 0, got {shown}",
                          rule="tensor_scalar-unary-operand", limit="None or 0", value=shown,
                          where=where())
    if name in _TS_UNARY_GEN4:
        gates.require(ctx, f"tensor_scalar.op.{name}")


def apply_ts_op(name: str, x, operand_value, reverse: bool, ints: bool = False):
    """One stage of ``(data op0 operand0) op1 operand1``; unary ops ignore the operand."""
    if name in TS_UNARY:
        return UNARY[name](x)
    return _compute(name, operand_value, x, ints) if reverse else _compute(name, x, operand_value,
                                                                           ints)


def _compute(name: str, a, b, ints: bool):
    if name in BITVEC:
        return BINARY[name](a, b)
    if ints and name in _INT_EXACT:
        a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
        if name == "mod":
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.mod(a64, np.where(b64 == 0, 1, b64))
        return {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
                "maximum": np.maximum, "minimum": np.minimum}[name](a64, b64)
    return BINARY[name](a, b)


def _raw(v, d: np.dtype):
    """Operand values for the ALU: integer tiles stay integers, floats go to fp32."""
    if dt.is_int(d):
        return v
    return f32(v)


def _scalar_dtype_weak(x) -> np.dtype:
    return dt.scalar_dtype(x)


# -- nl.* binary arithmetic (broadcasting, promotion) -----------------------------------------

def binary(name: str, x: Any, y: Any, *, dtype=None, mask=None, engine=None, dst=None,
           opname: Optional[str] = None):
    """``nl.add(x, y)`` and friends: numpy broadcasting, NKI promotion, vector engine."""
    ctx = current()
    op = opname or name
    if isinstance(x, _IndexBase) or isinstance(y, _IndexBase):
        raise KernelError(f"nl.{op} takes tiles or scalars; index expressions belong in subscripts, "
                          "masks or nisa.iota", rule="operand-type", where=where())
    if _is_scalar(x) and _is_scalar(y):
        raise KernelError(f"nl.{op} needs at least one tile operand", rule="operand-type",
                          where=where())
    eng = base.engine_name(engine, "vector")
    if _is_scalar(y) or _is_scalar(x):
        t, s, rev = (x, y, False) if _is_scalar(y) else (y, x, True)
        t = tile(ctx, t, "x" if not rev else "y", f"nl.{op}", eng)
        od = base.out_dtype(ctx, dtype, t) if dtype is not None else \
            _true_div(name, _promote_weak(t.dtype, s))
        return _tensor_scalar(ctx, dst, t, [(name, s, rev)], od, mask, eng, op)
    a = tile(ctx, x, "x", f"nl.{op}", eng)
    b = tile(ctx, y, "y", f"nl.{op}", eng)
    od = base.out_dtype(ctx, dtype, a, b)
    if dtype is None:
        od = _true_div(name, od)
    try:
        shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"nl.{op}: shapes {a.shape} and {b.shape} do not broadcast",
                         rule="broadcast-shape", value=(a.shape, b.shape), where=where()) from None
    # a (P, 1) column against a (P, F) tile is a tensor_scalar with a per-partition operand
    for big, col, rev in ((a, b, False), (b, a, True)):
        if col.shape[0] == big.shape[0] and col.size == col.shape[0] and big.size > col.size \
                and tuple(shape) == tuple(big.shape):
            return _tensor_scalar(ctx, dst, big, [(name, col, rev)], od, mask, eng, op)
    m = op_mask(mask, shape)
    va, ia = read(ctx, a, f"nl.{op}", m if a.shape == tuple(shape) else None)
    vb, ib = read(ctx, b, f"nl.{op}", m if b.shape == tuple(shape) else None)
    ints = dt.is_int(a.dtype) and dt.is_int(b.dtype)
    if ints and name in _INT_EXACT and eng == "vector":
        eng = "gpsimd"
    for t in (a, b):
        base.check_free_size(ctx, t, "operand", f"nl.{op}")
        base.check_alignment(ctx, t, "operand", f"nl.{op}")
    vals = None
    if ctx.numerics:
        # fp32/bf16 operands into a bf16 result: the C fast path computes the fp32 op and the
        # round to nearest even in one pass, bit for bit what the numpy expression below gives
        if od == _BF16 and va.shape == vb.shape and not ctx.convert.stochastic and \
                dt.storage_dtype(od, ctx.options.precise_fp) == _BF16:
            if dst is None and m is None and ia is None and ib is None and a.shape == b.shape:
                # ``x[...] = nl.add(x[...], acc, dtype=bf16)``: computed straight into x
                out = hot_update.pending(ctx, name, a, b, va, vb, od, eng, (("op", name),))
                if out is not None:
                    return out
            vals = fastpath.binary_to_bf16(name, va, vb)
        if vals is None:
            vals = _compute(name, _raw(va, a.dtype), _raw(vb, b.dtype), ints)
        if vals.shape != shape:  # a broadcast view only when needed: a fresh result is adopted
            vals = np.broadcast_to(vals, shape)
    init = base.and_init(tuple(shape), ia, ib)
    attrs = [("op", name)]
    if a.shape != b.shape:
        attrs.append(("broadcast", True))
        # a [1, F] operand repeated over the partitions: the compiler's broadcast instruction first
        a, b = (lower_implicit(ctx, t, tuple(shape), eng) for t in (a, b))
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=tuple(shape), out_dtype=od, mask=m,
                engine=eng, opcode="tensor_tensor", reads=[a, b], attrs=attrs)


def _true_div(name: str, d: np.dtype) -> np.dtype:
    """Division of integers is true division: the result is fp32, not an integer."""
    return dt.float32 if name == "divide" and dt.is_int(d) else d


def _promote_weak(d: np.dtype, s) -> np.dtype:
    return dt.promote(d, _scalar_dtype_weak(s))


def operator(name: str, a, b, reverse: bool):
    """Tile operators (``a + b``, ``2 * a``, ``a < b``)."""
    if reverse:
        a, b = b, a
    if not isinstance(b, (NkiTensor,) + _SCALARS) or not isinstance(a, (NkiTensor,) + _SCALARS):
        return NotImplemented
    return binary(name, a, b)


def unary_operator(name: str, a):
    """``abs(t)`` / ``~t`` on a tile (a unary Vector instruction)."""
    from .activation import unary
    return unary(name, a)


# -- tensor_scalar -----------------------------------------------------------------------------

def _tensor_scalar(ctx, dst, data: NkiTensor, ops, od, mask, eng, opname, opcode="tensor_scalar"):
    """``(data op0 operand0) op1 operand1``; operands are scalars or (P, 1) columns."""
    shape = data.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, data, opname, m)
    base.check_free_size(ctx, data, "data", opname)
    base.check_alignment(ctx, data, "data", opname)
    reads = [data]
    vals = _raw(v, data.dtype) if ctx.numerics else None
    ints = dt.is_int(data.dtype)
    attrs = []
    for i, (name, operand, rev) in enumerate(ops):
        if name is None:
            continue
        if name in TS_UNARY:  # no operand to read (checked to be None or 0 by the caller)
            if vals is not None:
                vals = apply_ts_op(name, vals, None, rev)
            ints = ints and name in TS_UNARY_BITVEC
            attrs.append((f"op{i}", name))
            continue
        ov, oinit, ot = base.scalar_or_column(ctx, operand, shape, f"operand{i}", opname, eng)
        if ot is not None:
            reads.append(ot)
            ints = ints and dt.is_int(ot.dtype)
            if oinit is not None:
                init = base.and_init(shape, init, oinit)
            if ctx.numerics and dt.is_int(ot.dtype):
                ov = read(ctx, ot, opname)[0].reshape(ov.shape)
        else:
            ints = ints and isinstance(operand, (int, np.integer))
            if ctx.numerics and isinstance(operand, (int, np.integer)) and dt.is_int(data.dtype):
                ov = np.int64(operand)
        if vals is not None:
            vals = _compute(name, ov, vals, ints) if rev else _compute(name, vals, ov, ints)
        attrs.append((f"op{i}", name))
    if vals is not None and vals.shape != tuple(shape):
        vals = np.broadcast_to(vals, shape)
    if ints and eng == "vector" and all(n in _INT_EXACT for n, _, _ in ops if n):
        eng = "gpsimd"
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode=opcode, reads=reads, attrs=attrs)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, *, dtype=None, mask=None, engine=None):
    """``nisa.tensor_scalar``."""
    ctx = current()
    eng = base.engine_name(engine, "vector")
    t = tile(ctx, data, "data", "tensor_scalar", eng)
    n0 = token_name(op0, "op0")
    n1 = token_name(op1, "op1") if op1 is not None else None
    check_ts_op(ctx, n0, operand0, "tensor_scalar", "op0")
    if n1 is not None:
        check_ts_op(ctx, n1, operand1, "tensor_scalar", "op1")
    if is_bitvec(n0) != is_bitvec(n1) and n1 is not None:
        raise KernelError("tensor_scalar: op0 and op1 must both be arithmetic or both bitwise",
                          rule="tensor_scalar-ops", value=(n0, n1), where=where())
    _check_tensor_scalar_engine(ctx, eng, n0, n1)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    ops = [(n0, operand0, bool(reverse0))]
    if n1 is not None:
        ops.append((n1, operand1, bool(reverse1)))
    return _tensor_scalar(ctx, dst, t, ops, od, mask, eng, "tensor_scalar")


# the ops the Scalar engine runs from its first generation with tensor_scalar (v3); others need
# the later generation the registry names
_SCALAR_ENGINE_BASIC_OPS = frozenset([("multiply", "add"), ("multiply", None), ("add", None)])


def _check_tensor_scalar_engine(ctx, eng: str, n0: str, n1: Optional[str]) -> None:
    """ISA docs: bitvec tensor_scalar runs on Vector only; the Scalar engine has add/multiply only
    from NeuronCore-v3 (ALU table note) and on trn2 only multiply[+add] or add."""
    if (is_bitvec(n0) or is_bitvec(n1)) and eng != "vector":
        raise KernelError(f"tensor_scalar: bitvec operators run on the Vector engine, not {eng}",
                          rule="tensor_scalar-engine", limit="vector", value=eng, where=where())
    if eng != "scalar":
        return
    gates.require(ctx, "tensor_scalar.engine.scalar")
    if (n0, n1) not in _SCALAR_ENGINE_BASIC_OPS:
        gates.require(ctx, "tensor_scalar.engine.scalar.any_op")


def reciprocal(dst, data, *, dtype=None, mask=None):
    """1 / data on the Vector engine (more precise than the Scalar activation), traced as
    ``reciprocal``; into ``dst`` or a new tile of ``dtype`` (default: data's)."""
    ctx = current()
    t = tile(ctx, data, "data", "reciprocal", "vector")
    od = dtype if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    return _tensor_scalar(ctx, dst, t, [("divide", 1.0, True)], od, mask, "vector", "reciprocal",
                          opcode="reciprocal")


def tensor_scalar_into(ctx, dst: NkiTensor, data: NkiTensor, name: str, scalar) -> None:
    """``dst = data <name> scalar`` (an in-place operator on a tile)."""
    t = tile(ctx, data, "data", f"nl.{name}", "vector")
    _tensor_scalar(ctx, dst, t, [(name, scalar, False)], dst.dtype, None, "vector", f"nl.{name}")


# -- tensor_tensor -----------------------------------------------------------------------------

def tensor_tensor(dst, data1, data2, op, *, dtype=None, mask=None, engine=None):
    """``nisa.tensor_tensor``: same partitions and elements per partition, no broadcasting."""
    ctx = current()
    name = token_name(op)
    default = "gpsimd" if name == "power" else "vector"
    eng = base.engine_name(engine, default)
    a = tile(ctx, data1, "data1", "tensor_tensor", eng)
    b = tile(ctx, data2, "data2", "tensor_tensor", eng)
    base.same_partitions(a, b, "tensor_tensor", "data1", "data2")
    if a.size != b.size:
        raise ShapeError(f"tensor_tensor: data1 {a.shape} and data2 {b.shape} differ in elements per "
                         "partition", rule="err_num_partition_mismatch", limit=a.shape,
                         value=b.shape, where=where())
    if a._st.memory == "psum" and b._st.memory == "psum":
        raise MemoryAccessError("tensor_tensor: at most one input may be in PSUM",
                                rule="tensor_tensor-two-psum", limit="at most 1 PSUM input",
                                value="data1 and data2 in PSUM", where=where())
    od = dt.as_dtype(dtype) if dtype is not None else (
        dst.dtype if dst is not None else dt.promote(a.dtype, b.dtype))
    return tensor_tensor_core(ctx, dst, a, b, name, od, mask, eng)


def tensor_tensor_core(ctx, dst, a: NkiTensor, b: NkiTensor, name: str, od, mask, eng):
    """tensor_tensor once its operands are checked tiles: compute, round, emit."""
    shape = a.shape
    m = op_mask(mask, shape)
    va, ia = read(ctx, a, "tensor_tensor", m)
    vb, ib = read(ctx, b, "tensor_tensor", None)
    for t in (a, b):
        base.check_free_size(ctx, t, "operand", "tensor_tensor")
        base.check_alignment(ctx, t, "operand", "tensor_tensor")
    ints = dt.is_int(a.dtype) and dt.is_int(b.dtype)
    vals = None
    if ctx.numerics:
        vb2 = vb.reshape(shape) if vb.shape != shape else vb
        vals = _compute(name, _raw(va, a.dtype), _raw(vb2, b.dtype), ints)
    init = base.and_init(shape, ia, None if ib is None else ib.reshape(shape))
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode="tensor_tensor", reads=[a, b], attrs=(("op", name),))


def tensor_tensor_into(ctx, dst: NkiTensor, a, b, name: str) -> None:
    """``dst op= b`` on tiles (``acc += t``), numpy broadcasting allowed."""
    binary(name, a, b, dst=dst, dtype=dst.dtype)


# -- scalar_tensor_tensor ----------------------------------------------------------------------

def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         *, dtype=None, mask=None, engine=None):
    """``(data op0 operand0) op1 operand1``; operand0 scalar or (P,1), operand1 a tile like data."""
    ctx = current()
    eng = base.engine_name(engine, "vector")
    t = tile(ctx, data, "data", "scalar_tensor_tensor", eng)
    o1 = tile(ctx, operand1, "operand1", "scalar_tensor_tensor", eng)
    base.same_partitions(t, o1, "scalar_tensor_tensor", "data", "operand1")
    if t.size != o1.size:
        raise ShapeError("scalar_tensor_tensor: operand1 must match data's shape",
                         rule="stt-shape", limit=t.shape, value=o1.shape, where=where())
    if t._st.memory == "psum" and o1._st.memory == "psum":
        raise MemoryAccessError("scalar_tensor_tensor: data and operand1 cannot both be in PSUM",
                                rule="tensor_tensor-two-psum", limit="at most 1 PSUM input",
                                value="data and operand1 in PSUM", where=where())
    n0, n1 = token_name(op0, "op0"), token_name(op1, "op1")
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, "scalar_tensor_tensor", m)
    s0, i0, st0 = base.scalar_or_column(ctx, operand0, shape, "operand0", "scalar_tensor_tensor", eng)
    v1, i1 = read(ctx, o1, "scalar_tensor_tensor")
    od = dt.as_dtype(dtype) if dtype is not None else (
        dst.dtype if dst is not None else dt.promote(t.dtype, o1.dtype))
    vals = None
    if ctx.numerics:
        x = f32(v)
        x = BINARY[n0](s0, x) if reverse0 else BINARY[n0](x, s0)
        y = f32(v1).reshape(shape)
        vals = BINARY[n1](y, x) if reverse1 else BINARY[n1](x, y)
    init = base.and_init(shape, init, i0, None if i1 is None else i1.reshape(shape))
    reads = [t, o1] + ([st0] if st0 is not None else [])
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode="scalar_tensor_tensor", reads=reads,
                attrs=(("op0", n0), ("op1", n1)))


# -- copies and fills --------------------------------------------------------------------------

def tensor_copy(dst, src, *, dtype=None, mask=None, engine=None, opcode="tensor_copy"):
    """``nisa.tensor_copy`` / ``nl.copy``: bit-exact when dtypes match, else via fp32."""
    ctx = current()
    eng = base.engine_name(engine, "vector")
    t = tile(ctx, src, "src", opcode, eng)
    shape = t.shape
    m = op_mask(mask, shape)
    v, init = read(ctx, t, opcode, m)
    base.check_free_size(ctx, t, "src", opcode)
    od = dt.as_dtype(dtype) if dtype is not None else (dst.dtype if dst is not None else t.dtype)
    if dst is not None and dst.size != t.size:
        raise ShapeError(f"{opcode}: dst '{dst.name}' {dst.shape} and src {t.shape} differ",
                         rule="dst-shape", limit=t.shape, value=dst.shape, where=where())
    vals = v if ctx.numerics else None
    if vals is not None and not (od == t.dtype or dt.storage_dtype(od) == v.dtype):
        vals = v if dt.is_int(t.dtype) else f32(v)
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode=opcode, reads=[t])


register_stage_copy(tensor_copy)   # the compiler's PSUM -> SBUF staging copy (operands.py)


def memset(ctx, shape, value, dtype, *, mask=None, engine=None, dst=None):
    """Fill ``dst`` (or a new tile of ``shape``) with ``value`` on Vector or GpSimd."""
    eng = base.engine_name(engine, "vector")
    od = dt.as_dtype(dtype) if dtype is not None else dst.dtype
    if dst is None:
        from ..core.alloc import parse_shape
        shape, _ = parse_shape(shape, True, True)  # positive integers, or a ShapeError
        if len(shape) < 2:
            raise ShapeError(f"memset: on-chip tiles need at least 2 dims, got {shape}",
                             rule="onchip-rank", limit=">= 2", value=shape, where=where())
    shape = tuple(shape) if dst is None else dst.shape
    if dst is None and shape[0] > ctx.spec.tile_size.pmax:
        from ...errors import PartitionError
        raise PartitionError(f"memset of {shape[0]} partitions", rule="err_num_partition_exceed_arch_limit",
                             limit=ctx.spec.tile_size.pmax, value=shape[0], where=where())
    m = op_mask(mask, shape)
    vals = None
    if ctx.numerics:
        vals = np.full(shape, value, dtype=np.int64 if dt.is_int(od) and
                       isinstance(value, (int, np.integer)) else np.float32)
    return emit(ctx, dst=dst, values=vals, init=None, out_shape=shape, out_dtype=od, mask=m,
                engine=eng, opcode="memset", reads=[], dtype_in="-", attrs=(("value", float(value)),))


def out_for(x, y) -> np.dtype:
    """The result dtype of a select between ``x`` and ``y`` (tiles or scalars)."""
    d = None
    for v in (x, y):
        if isinstance(v, NkiTensor):
            d = v.dtype if d is None else dt.promote(d, v.dtype)
    return d if d is not None else dt.float32
