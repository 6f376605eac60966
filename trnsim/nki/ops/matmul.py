"""Tensor engine: ``nc_matmul`` (stationary.T @ moving into PSUM, fp32 accumulation), PE and Vector
transposes, and the ``nl.matmul`` / ``nl.transpose`` conveniences.

The PE array multiplies exactly (bf16/fp8 products fit fp32) and accumulates in fp32 [ARCH2]; trnsim
computes the product in fp32 BLAS, so the summation order inside one 128-deep dot product may differ
from the array's in the last bit.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import (DtypeError, KernelError, MemoryAccessError, PartitionError, ShapeError,
                       UnsupportedError)
from ..core import dtypes as dt, gates
from ..core.context import current
from ..core.tensor import NkiTensor
from ..core.fastpath import product_buffers
from . import base, hot_matmul
from .base import emit, f32, op_mask, read, tile, where

_FP32_LIKE = ("float32", "tfloat32")
_F32 = dt.float32
_DOUBLE_ROW = ("double_row", "double_row_gen3", "double_row_gen4")


def sbuf_operand(ctx, x, role: str, op: str) -> NkiTensor:
    """A matmul operand must be in SBUF; where the compiler stages PSUM operands (Conventions), a
    PSUM result is copied to SBUF first, and so do we, tracing the copy."""
    t = x if type(x) is NkiTensor else base.need_tensor(x, role, op)
    if t._st.memory == "psum" and ctx.conventions.stage_psum_operands:
        t = base.implicit_copy(ctx, t, role, op)
    return tile(ctx, t, role, op, "tensor", memories=("sbuf",))


def _perf_mode(perf_mode) -> Optional[str]:
    if perf_mode is None:
        return None
    name = getattr(perf_mode, "name", perf_mode)
    name = str(name).lower()
    if name in ("none", "", "0"):
        return None
    if name in _DOUBLE_ROW:
        return "double_row"
    raise UnsupportedError(f"matmul perf_mode {perf_mode!r} is not modelled", rule="matmul-perf-mode",
                           value=perf_mode, where=where())


def nc_matmul(dst, stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, tile_position=(), tile_size=(), mask=None, perf_mode=None,
              accumulate=None, opcode="nc_matmul"):
    """``stationary.T @ moving`` on the Tensor engine into PSUM (or a fresh PSUM tile)."""
    ctx = current()
    default = dst is None and accumulate is None and perf_mode is None and is_transpose is False \
        and type(tile_position) is tuple and not tile_position and type(tile_size) is tuple and \
        not tile_size and is_stationary_onezero is False and is_moving_onezero is False
    if default and mask is None:
        out = hot_matmul.product(ctx, stationary, moving, opcode)
        if out is not None:
            return out
    te = ctx.spec.tensor
    s = sbuf_operand(ctx, stationary, "stationary", opcode)
    mv = sbuf_operand(ctx, moving, "moving", opcode)
    # every check below depends only on this key: kernels issue the same matmul shape thousands
    # of times, so the checks run once per shape and the result is reused
    plans = ctx.op_plans
    if default:
        # every flag at its default (the hot case): a short key, which no full key equals
        key = (opcode, s._shape, s._dtype, mv._shape, mv._dtype)
        plan = plans.get(key)
    else:
        try:
            key = (opcode, s._shape, s._dtype, mv._shape, mv._dtype, is_transpose, perf_mode,
                   tuple(tile_position), tuple(tile_size), accumulate, bool(is_stationary_onezero),
                   bool(is_moving_onezero),
                   None if dst is None else (dst._shape, dst._dtype, dst._st.memory, dst.size))
            plan = plans.get(key)
        except (TypeError, AttributeError):  # an odd argument: no caching, the checks report it
            plan = None
            key = None
    if plan is None:
        plan = _matmul_plan(ctx, te, s, mv, dst, is_stationary_onezero, is_moving_onezero,
                            is_transpose, tile_position, tile_size, perf_mode, accumulate, opcode)
        if key is not None:
            plans[key] = plan
    K, M, N, mode, od, sname, out_shape, attrs = plan
    m = None if mask is None else op_mask(mask, out_shape)
    vs, i_s = base.read_f32(ctx, s, opcode)
    vm, i_m = base.read_f32(ctx, mv, opcode)
    vals = None
    if ctx.numerics:
        a = vs.reshape(-1, M)
        b = vm.reshape(-1, N)
        # the same BLAS call into a product buffer that an earlier ``psum += nc_matmul(...)``
        # handed back (no allocation, and the buffer is still in cache)
        spare = product_buffers.take((M, N)) if dst is None else None
        vals = a.T @ b if spare is None else np.matmul(a.T, b, out=spare)
        if vals.shape != tuple(out_shape):  # reshape only when needed: a fresh array is adopted
            vals = vals.reshape(out_shape)     # as the result tile's storage (no copy)
        if is_transpose and te.transpose_keeps_16bit:
            # gen3+ transpose mode passes the stationary data through instead of
            # multiply-accumulating, so NaN/Inf and -0 survive bit-exactly [ARCH3]; a 0/1 moving
            # tile with at most one 1 per column (an identity) selects stationary rows
            sel = b != 0
            if (sel.sum(axis=0) <= 1).all() and (b[sel] == 1).all():
                picked = a[sel.argmax(axis=0), :].T
                vals = np.where(sel.any(axis=0)[None, :], picked, np.float32(0)).reshape(out_shape)
    init = None
    if i_s is not None or i_m is not None:
        cs = np.ones(M, bool) if i_s is None else i_s.reshape(-1, M).all(axis=0)
        cm = np.ones(N, bool) if i_m is None else i_m.reshape(-1, N).all(axis=0)
        init = (cs[:, None] & cm[None, :]).reshape(out_shape)
    if dst is None:
        if m is None and init is None:
            return base.emit_fresh(ctx, vals, out_shape, od, "tensor", opcode, (s, mv), "psum", K,
                                   N, attrs, sname)
        return emit(ctx, dst=None, values=vals, init=init, out_shape=out_shape, out_dtype=od, mask=m,
                    engine="tensor", opcode=opcode, reads=[s, mv], memory="psum", partitions=K,
                    free=N, attrs=attrs, dtype_in=sname)
    # new API: accumulate None -> overwrite where PSUM was never written since allocation, else add
    base.check_writable(ctx, dst, opcode)
    if vals is not None and m is not False:
        old = dst.array()
        if accumulate is True:
            vals = f32(old) + vals
        elif accumulate is None:
            if dst._st.full:
                vals = f32(old) + vals
            else:
                vals = np.where(base.written(ctx, dst, opcode), f32(old) + vals, vals)
    acc_reads = [s, mv] + ([dst] if accumulate is not False else [])
    attrs = (("accumulate", accumulate is not False),) + attrs[1:]
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=out_shape, out_dtype=od, mask=m,
                engine="tensor", opcode=opcode, reads=acc_reads, memory="psum", partitions=K,
                free=N, attrs=attrs, dtype_in=sname)


def _matmul_plan(ctx, te, s, mv, dst, is_stationary_onezero, is_moving_onezero, is_transpose,
                 tile_position, tile_size, perf_mode, accumulate, opcode):
    """The hardware-rule checks of one matmul shape and what follows from them:
    (K, M, N, perf mode, output dtype, stationary dtype name, output shape, trace attrs)."""
    spec = ctx.spec
    mode = _perf_mode(perf_mode)
    sname, mname = dt.name(s.dtype), dt.name(mv.dtype)
    for t, n, role in ((s, sname, "stationary"), (mv, mname, "moving")):
        if n not in te.input_dtypes:
            raise DtypeError(f"{opcode}: {role} dtype {n} is not a Tensor-engine input on "
                             f"{spec.name}", rule="matmul-input-dtype",
                             limit=", ".join(te.input_dtypes), value=n, where=where())
    if (sname in _FP32_LIKE) != (mname in _FP32_LIKE):
        raise DtypeError(f"{opcode}: fp32/tf32 operands must be paired with fp32/tf32 "
                         f"(stationary {sname}, moving {mname})", rule="matmul-fp32-pairing",
                         limit="fp32/tf32 with fp32/tf32", value=f"{sname} with {mname}",
                         where=where())
    if (sname == "float8_e4m3fn") != (mname == "float8_e4m3fn") and \
            {sname, mname} & {"float8_e4m3", "float8_e5m2"}:
        raise DtypeError(f"{opcode}: OCP float8_e4m3fn cannot be mixed with legacy fp8",
                         rule="matmul-fp8-mix", limit="float8_e4m3fn with float8_e4m3fn",
                         value=f"{sname} with {mname}", where=where())
    K = s.shape[0]
    if mv.shape[0] != K:
        raise ShapeError(f"{opcode}: stationary and moving must share the contraction (partition) "
                         f"dim: {s.shape} vs {mv.shape}", rule="matmul-contraction", limit=K,
                         value=mv.shape[0], where=where())
    if K > te.max_contraction:
        raise ShapeError(f"{opcode}: contraction dim {K} exceeds the PE array",
                         rule="matmul-contraction-limit", limit=te.max_contraction, value=K,
                         where=where())
    if mode == "double_row":
        gates.require(ctx, "matmul.double_row")
        if tile_position or tile_size or is_transpose:
            raise KernelError("double_row is incompatible with tiling and transpose mode",
                              rule="matmul-double-row-combination", where=where())
        for t, role in ((s, "stationary"), (mv, "moving")):
            if t.ndim != 3 or t.shape[1] != 2:
                raise ShapeError(f"{opcode}: double_row {role} must be shaped [K, 2, F], got "
                                 f"{t.shape}", rule="matmul-double-row-shape", limit="[K, 2, F]",
                                 value=t.shape, where=where())
            if dt.name(t.dtype) not in ("float8_e4m3", "float8_e5m2"):
                raise DtypeError(f"{opcode}: double_row {role} must be fp8 e4m3/e5m2",
                                 rule="matmul-double-row-dtype", value=dt.name(t.dtype), where=where())
        M, N = s.shape[2], mv.shape[2]
    else:
        M = s.size // K
        N = mv.size // K
    if M > te.max_stationary_free:
        raise ShapeError(f"{opcode}: stationary free size {M} exceeds the PE array columns",
                         rule="matmul-stationary-free", limit=te.max_stationary_free, value=M,
                         where=where())
    # output dtype
    if dst is not None:
        od = dst.dtype
    elif is_transpose and te.transpose_keeps_16bit and sname in ("bfloat16", "float16"):
        od = s.dtype
    elif is_transpose and te.transpose_keeps_16bit and sname in ("float8_e4m3", "float8_e5m2"):
        od = dt.bfloat16
    else:
        od = dt.float32
    on = dt.name(od)
    allowed_out = te.output_dtypes
    if is_transpose and te.transpose_keeps_16bit:
        allowed_out = tuple(allowed_out) + ("bfloat16", "float16")
    if on not in allowed_out:
        raise DtypeError(f"{opcode}: PSUM output dtype {on} is not supported on {spec.name}",
                         rule="matmul-output-dtype", limit=", ".join(sorted(set(allowed_out))), value=on,
                         where=where())
    nmax = te.max_moving_free if od.itemsize == 4 else te.max_moving_free_16bit_out
    if N > nmax:
        raise ShapeError(f"{opcode}: moving free size {N} exceeds the limit for {on} output",
                         rule="matmul-moving-free", limit=nmax, value=N, where=where())
    _check_tiling(te, tile_position, tile_size, K, M, opcode)
    out_shape = (M, N)
    if dst is not None:
        if dst._st.memory != "psum":
            raise MemoryAccessError(f"{opcode}: dst '{dst.name}' must be in PSUM (the Tensor engine "
                                    "writes only PSUM)", rule="matmul-dst-psum", limit="psum",
                                    value=dst._st.memory, where=where())
        if dst.size != M * N or dst.shape[0] != M:
            raise ShapeError(f"{opcode}: dst {dst.shape} does not fit the result ({M}, {N})",
                             rule="dst-shape", limit=out_shape, value=dst.shape, where=where())
        out_shape = dst.shape
    attrs = [("accumulate", bool(accumulate) if accumulate is not None else False),
             ("moving_free", N), ("stationary_free", M), ("contraction", K * (2 if mode else 1))]
    if mode:
        attrs.append(("perf_mode", mode))
    if is_transpose:
        attrs.append(("transpose", True))
    if tile_size:
        attrs.append(("tile_size", tuple(tile_size)))
    if is_stationary_onezero or is_moving_onezero:
        attrs.append(("onezero", True))
    return K, M, N, mode, od, sname, tuple(out_shape), tuple(attrs)


def _check_tiling(te, position, size, K, M, op):
    if not position and not size:
        return
    if len(position) != 2 or len(size) != 2:
        raise ShapeError(f"{op}: tile_position and tile_size take (row, column) pairs",
                         rule="matmul-tiling", limit="(row, column) pairs", value=(position, size),
                         where=where())
    g = te.tile_granularity
    for v in tuple(position) + tuple(size):
        if int(v) % g:
            raise ShapeError(f"{op}: PE tile sizes and positions must be multiples of {g}",
                             rule="matmul-tiling-granularity", limit=g, value=v, where=where())
    rs, cs = int(size[0]), int(size[1])
    rp, cp = int(position[0]), int(position[1])
    if rp + rs > te.max_contraction or cp + cs > te.max_stationary_free:
        raise ShapeError(f"{op}: PE tile at {tuple(position)} of size {tuple(size)} leaves the array",
                          rule="matmul-tiling-bounds", limit=(te.max_contraction, te.max_stationary_free),
                          value=(rp + rs, cp + cs), where=where())
    if K > rs or M > cs:
        raise ShapeError(f"{op}: operands ({K} rows, {M} columns) exceed the PE tile {tuple(size)}",
                         rule="matmul-tiling-size", limit=(rs, cs), value=(K, M), where=where())


def nc_transpose(dst, data, *, engine=None, mask=None, dtype=None):
    """Swap the partition dim with the (flattened) free dim: PE (<=128x128, via identity matmul,
    result in PSUM) or Vector (<=32x32, SBUF/PSUM)."""
    ctx = current()
    t = base.need_tensor(data, "data", "nc_transpose")
    eng = base.engine_name(engine, "tensor")
    P = t.shape[0]
    F = t.size // P if t._gather is None else int(np.prod(t.shape[1:]))
    if eng == "vector":
        src = tile(ctx, t, "data", "nc_transpose", "vector")
        if P > 32 or F > 32:
            raise ShapeError(f"nc_transpose on the Vector engine handles at most 32x32, got {P}x{F}",
                             rule="err_size_of_dimension_exceed_arch_limit", limit="32x32",
                             value=f"{P}x{F}", where=where())
        memory = "sbuf"
        od = t.dtype
    elif eng == "tensor":
        src = sbuf_operand(ctx, t, "data", "nc_transpose")
        if F > ctx.spec.tile_size.pmax:
            raise PartitionError(f"nc_transpose on the Tensor engine: free size {F} becomes the "
                                 "partition dim", rule="err_size_of_dimension_exceed_arch_limit",
                                 limit=ctx.spec.tile_size.pmax, value=F, where=where())
        memory = "psum"
        n = dt.name(t.dtype)
        if ctx.spec.tensor.transpose_keeps_16bit and n in ("bfloat16", "float16"):
            od = t.dtype
        elif n in ("float8_e4m3", "float8_e5m2", "float8_e3m4"):
            od = dt.bfloat16 if ctx.spec.tensor.transpose_keeps_16bit else dt.float32
        else:
            od = dt.float32 if n not in ("bfloat16", "float16") or not \
                ctx.spec.tensor.transpose_keeps_16bit else t.dtype
    else:
        raise KernelError(f"nc_transpose runs on the Tensor or Vector engine, not {eng}",
                          rule="transpose-engine", value=eng, where=where())
    if dtype is not None:
        od = dt.as_dtype(dtype)
    if dst is not None:
        od = dst.dtype
    v, init = read(ctx, src, "nc_transpose")
    out_shape = (F, P)
    vals = None
    if ctx.numerics:
        x = v.reshape(P, F).T
        vals = x if (eng == "vector" or od == t.dtype) else f32(x)
    rinit = None if init is None else init.reshape(P, F).T
    return emit(ctx, dst=dst, values=vals, init=rinit, out_shape=out_shape, out_dtype=od,
                mask=op_mask(mask, out_shape), engine=eng,
                opcode="nc_transpose" if eng == "vector" else "nc_matmul", reads=[src],
                memory=memory, partitions=P, free=F,
                attrs=(("transpose", True), ("moving_free", P), ("stationary_free", F),
                       ("contraction", P)) if eng == "tensor" else (("transpose", True),))


def nl_matmul(x, y, *, transpose_x=False, mask=None):
    """``nl.matmul``: ``x @ y`` (or ``x.T @ y``) into a new PSUM tile."""
    ctx = current()
    if not transpose_x:
        xt = base.need_tensor(x, "x", "nl.matmul")
        K, kmax = xt.shape[-1], ctx.spec.tensor.max_contraction
        if K > kmax:  # x is (M, K): its free dim becomes the contraction (partition) dim
            raise ShapeError(f"nl.matmul: contraction dim {K} (the last dim of x {xt.shape}) exceeds "
                             "the PE array", rule="matmul-contraction-limit", limit=kmax, value=K,
                             where=where())
        xd = x.dtype
        x = nc_transpose(None, x)
        if x.dtype != xd:
            # a gen2 PE transpose leaves fp32 in PSUM; the compiler evicts it to SBUF in x's own
            # dtype (an fp32 stationary could not pair with a bf16/fp8 moving tile)
            from .elementwise import tensor_copy
            x = tensor_copy(None, x, dtype=xd)
    return nc_matmul(None, x, y, mask=mask)
