"""Instructions that exist only in the new NKI API (``nki.isa``, NKI >= 0.2): predicated selects with
a running max (``select_reduce``, ``range_select``), top-8 helpers (``nc_find_index8``,
``nc_match_replace8``), the cumulative tensor-scalar scan, GpSimd gathers (``local_gather``,
``nc_n_gather``), ``nonzero_with_count``, ``sequence_bounds`` and the runtime registers' loads and
stores.  Semantics follow the SDK docstrings (``nki/api/nki/isa/__init__.py``, Neuron 2.32).

The Vector engine's per-partition accumulator registers are shared with ``tensor_scalar_reduce``
(``reduce._vector_accumulator``): a reduction started by one instruction can continue in another.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import DtypeError, GenerationError, KernelError, ShapeError
from ..core import dtypes as dt
from ..core.alu import BINARY, token_name
from ..core.context import current, region
from ..core.tensor import NkiTensor
from . import base
from .activation import ReduceCmd
from .base import emit, f32, read, tile, where
from .reduce import _vector_accumulator

FP32_MIN = float(np.finfo(np.float32).min)
_COMPARE = ("equal", "less", "less_equal", "greater", "greater_equal")
_CUM_OPS = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def _gen(ctx, gen: int, what: str) -> None:
    if ctx.spec.generation < gen:
        raise GenerationError(f"{what} needs NeuronCore-v{gen} or newer", rule="isa-generation",
                              limit=f"gen{gen}+", value=ctx.spec.nc_version, where=where())


def _flat(t: NkiTensor) -> int:
    return t.size // t.shape[0]


def _same_layout(a: NkiTensor, b: NkiTensor, op: str, ra: str, rb: str) -> None:
    base.same_partitions(a, b, op, ra, rb)
    if _flat(a) != _flat(b):
        raise ShapeError(f"{op}: {ra} {a.shape} and {rb} {b.shape} differ in elements per partition",
                         rule="shape-mismatch", limit=_flat(a), value=_flat(b), where=where())


def _cmd(reduce_cmd) -> ReduceCmd:
    return ReduceCmd(int(reduce_cmd)) if reduce_cmd is not None else ReduceCmd.idle


def _reduce_into(ctx, op: str, P: int, cmd: ReduceCmd, rname: str, rows: Optional[np.ndarray],
                 reduce_res, rinit, extra: list) -> None:
    """Steer the Vector accumulator with ``cmd`` (``rows`` = this instruction's per-partition
    reduction) and read it out into ``reduce_res``."""
    acc = _vector_accumulator(ctx)
    ident = _CUM_OPS.get(rname, 0.0)
    if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        acc[:P] = ident
    if cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.load_reduce) and rows is not None:
        acc[:P] = BINARY[rname](acc[:P], rows)
    if reduce_res is None:
        return
    rr = base.need_tensor(reduce_res, "reduce_res", op)
    base.check_writable(ctx, rr, op)
    if rr.shape[0] != P or rr.size != P:
        raise ShapeError(f"{op}: reduce_res must be a ({P}, 1) tile, got {rr.shape}",
                         rule="reduce-res-shape", limit=(P, 1), value=rr.shape, where=where())
    base.write(ctx, rr, acc[:P].copy().reshape(rr.shape) if ctx.numerics else None,
               None if rinit is None else rinit.reshape(rr.shape))
    extra.append(rr)


# -- registers ------------------------------------------------------------------------------------

def register_load(reg, src) -> None:
    """A runtime register <- the single value of a 1-element HBM/SBUF tensor."""
    ctx = current()
    t = base.need_tensor(src, "src", "register_load")
    if t.size != 1:
        raise ShapeError(f"register_load reads a 1-element tensor, got shape {t.shape}",
                         rule="register-load-shape", limit=1, value=t.size, where=where())
    if t._st.memory == "psum":
        raise KernelError("register_load reads HBM or SBUF, not PSUM", rule="register-load-memory",
                          limit="hbm or sbuf", value="psum", where=where())
    v, init = read(ctx, t, "register_load")
    if init is not None and not np.asarray(init).all():
        ctx.report_uninit(f"register_load reads never-written '{t.name}'",
                          rule="uninitialized-register")
    val = np.asarray(v).reshape(-1)[0]
    if val.dtype.kind == "f" or t.dtype in dt.LOW_PRECISION_FLOATS:
        fv = float(np.float32(val))
        val = 0 if not np.isfinite(fv) else int(fv)
    reg._set(int(val))
    ctx.record("sync", "register_load", [region(t)], [], 1, 1, dt.name(t.dtype), "int32")


def register_store(dst, value: int):
    """A 1-element HBM/SBUF tensor <- a register value."""
    ctx = current()
    d = base.need_tensor(dst, "dst", "register_store")
    if d.size != 1:
        raise ShapeError(f"register_store writes a 1-element tensor, got shape {d.shape}",
                         rule="register-store-shape", limit=1, value=d.size, where=where())
    vals = np.full(d.shape, int(value), dtype=np.int64) if ctx.numerics else None
    return emit(ctx, dst=d, values=vals, init=None, out_shape=d.shape, out_dtype=d.dtype, mask=None,
                engine="sync", opcode="register_store", reads=[], dtype_in="int32")


# -- selects with a running max ------------------------------------------------------------------

def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=ReduceCmd.idle,
                  reduce_op="maximum", reverse_pred=False):
    """dst = where(predicate (xor reverse_pred), on_true, on_false) on the Vector engine;
    optionally the per-partition max of the result goes to the accumulator / ``reduce_res``.
    ``on_false`` is an fp32 scalar or a (P, 1) column; ``predicate`` an integer tile."""
    ctx = current()
    op = "select_reduce"
    d = base.need_tensor(dst, "dst", op)
    pr = tile(ctx, predicate, "predicate", op, "vector")
    t = tile(ctx, on_true, "on_true", op, "vector")
    if pr._st.memory == "psum" and t._st.memory == "psum":
        raise KernelError(f"{op}: on_true and predicate cannot both be in PSUM",
                          rule="tensor_tensor-two-psum", where=where())
    if not dt.is_int(pr.dtype):
        raise DtypeError(f"{op}: predicate must be an integer tile", rule="predicate-dtype",
                         limit="int8/uint8/int16/uint16", value=dt.name(pr.dtype), where=where())
    if t.dtype in (dt.tfloat32, dt.int32, dt.uint32):
        raise DtypeError(f"{op}: on_true cannot be {dt.name(t.dtype)}", rule="select-dtype",
                         limit="not tfloat32/int32/uint32", value=dt.name(t.dtype), where=where())
    _same_layout(t, pr, op, "on_true", "predicate")
    _same_layout(t, d, op, "on_true", "dst")
    rname = token_name(reduce_op, "reduce_op")
    if rname != "maximum":
        raise KernelError(f"{op}: reduce_op must be nl.maximum", rule="select-reduce-op",
                          limit="maximum", value=rname, where=where())
    P, F = t.shape[0], _flat(t)
    pv, pinit = read(ctx, pr, op)
    tv, tinit = read(ctx, t, op)
    fv, finit, ft = base.scalar_or_column(ctx, on_false, (P, F), "on_false", op, "vector")
    cond = (np.asarray(pv).reshape(P, F) != 0) ^ bool(reverse_pred)
    vals = np.where(cond, f32(tv).reshape(P, F), fv) if ctx.numerics else None
    ti = None if tinit is None else (tinit.reshape(P, F).astype(bool) | ~cond)
    fi = None if finit is None else (np.broadcast_to(finit.reshape(P, 1), (P, F)) | cond)
    init = base.and_init((P, F), None if pinit is None else pinit.reshape(P, F), ti, fi)
    cmd = _cmd(reduce_cmd)
    if cmd == ReduceCmd.idle and reduce_res is not None:
        cmd = ReduceCmd.reset_reduce
    extra: list = []
    rows = vals.max(axis=1) if vals is not None else None
    rinit = None if init is None else init.all(axis=1)
    _reduce_into(ctx, op, P, cmd, rname, rows, reduce_res, rinit, extra)
    reads = [pr, t] + ([ft] if ft is not None else [])
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(d.shape), init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="vector", opcode=op,
                reads=reads, extra_writes=extra, attrs=(("reduce_cmd", cmd.name),))


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=ReduceCmd.reset_reduce, reduce_res=None, reduce_op="maximum",
                 range_start=0, on_false_value=FP32_MIN):
    """Keep ``on_true_tile[p, i]`` where ``comp_op0(range_start + i, bound0[p])`` and
    ``comp_op1(range_start + i, bound1[p])`` both hold (fp32 compares), else ``on_false_value``;
    the per-partition max goes to the Vector accumulator / ``reduce_res`` (gen3+)."""
    ctx = current()
    op = "range_select"
    _gen(ctx, 3, op)
    d = base.need_tensor(dst, "dst", op)
    t = tile(ctx, on_true_tile, "on_true_tile", op, "vector")
    if not dt.is_float(t.dtype) or t.dtype == dt.tfloat32:
        raise DtypeError(f"{op}: on_true_tile must be a float tile", rule="range-select-dtype",
                         limit="fp8/bf16/fp16/fp32", value=dt.name(t.dtype), where=where())
    n0, n1 = token_name(comp_op0, "comp_op0"), token_name(comp_op1, "comp_op1")
    for n in (n0, n1):
        if n not in _COMPARE:
            raise KernelError(f"{op}: comparison must be one of {', '.join(_COMPARE)}",
                              rule="range-select-compare", limit=_COMPARE, value=n, where=where())
    rname = token_name(reduce_op, "reduce_op")
    if rname != "maximum":
        raise KernelError(f"{op}: reduce_op must be nl.maximum", rule="range-select-reduce-op",
                          limit="maximum", value=rname, where=where())
    if not isinstance(range_start, (int, np.integer)):
        raise KernelError(f"{op}: range_start must be a compile-time integer",
                          rule="range-select-start", value=type(range_start).__name__,
                          where=where())
    _same_layout(t, d, op, "on_true_tile", "dst")
    P, F = t.shape[0], _flat(t)
    bounds = []
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        bt = tile(ctx, b, role, op, "vector")
        if bt.shape[0] != P or bt.size != P:
            raise ShapeError(f"{op}: {role} must be a ({P}, 1) tile, got {bt.shape}",
                             rule="range-select-bound", limit=(P, 1), value=bt.shape,
                             where=where())
        if bt.dtype != dt.float32:
            raise DtypeError(f"{op}: {role} must be float32", rule="range-select-bound-dtype",
                             limit="float32", value=dt.name(bt.dtype), where=where())
        bv, bi = read(ctx, bt, op)
        bounds.append((bt, f32(bv).reshape(P, 1), bi))
    tv, tinit = read(ctx, t, op)
    idx = (np.float32(range_start) + np.arange(F, dtype=np.float32)).reshape(1, F)
    m = (BINARY[n0](idx, bounds[0][1]) != 0) & (BINARY[n1](idx, bounds[1][1]) != 0)
    vals = np.where(m, f32(tv).reshape(P, F), np.float32(on_false_value)) if ctx.numerics else None
    init = base.and_init((P, F), None if tinit is None else (tinit.reshape(P, F).astype(bool) | ~m),
                         bounds[0][2], bounds[1][2])
    extra: list = []
    rows = vals.max(axis=1) if vals is not None else None
    rinit = None if init is None else init.all(axis=1)
    cmd = _cmd(reduce_cmd)
    _reduce_into(ctx, op, P, cmd, rname, rows, reduce_res, rinit, extra)
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(d.shape), init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="vector", opcode=op,
                reads=[t, bounds[0][0], bounds[1][0]], extra_writes=extra,
                attrs=(("reduce_cmd", cmd.name), ("op0", n0), ("op1", n1)))


# -- top-8 helpers ---------------------------------------------------------------------------------

def _eight(ctx, op, data, vals):
    d = tile(ctx, data, "data", op, "vector")
    v = tile(ctx, vals, "vals", op, "vector")
    base.same_partitions(d, v, op, "data", "vals")
    n = _flat(d)
    if not 8 <= n <= 16384:
        raise ShapeError(f"{op}: data has {n} elements per partition", rule=f"{op}-size",
                         limit="8..16384", value=n, where=where())
    if _flat(v) != 8:
        raise ShapeError(f"{op}: vals must hold 8 values per partition", rule=f"{op}-vals",
                         limit=8, value=_flat(v), where=where())
    dv, di = read(ctx, d, op)
    vv, vi = read(ctx, v, op)
    P = d.shape[0]
    return d, v, f32(dv).reshape(P, n), f32(vv).reshape(P, 8), di, vi


def _index_dtype_check(t: NkiTensor, op: str, role: str) -> None:
    if t.dtype not in (dt.uint16, dt.uint32, dt.int32, dt.int16):
        raise DtypeError(f"{op}: {role} holds indices and must be uint16 or uint32",
                         rule="index-dtype", limit="uint16/uint32", value=dt.name(t.dtype),
                         where=where())


def _sentinel(d: np.dtype) -> int:
    return 0xFFFF if d.itemsize == 2 else 0xFFFFFFFF


def nc_find_index8(dst, data, vals):
    """Per partition, the index of the first occurrence of each of the 8 ``vals`` in ``data``
    (duplicate vals take successive occurrences in ascending order); a value not present gives
    the all-ones sentinel (0xFFFFFFFF for uint32, 0xFFFF for uint16)."""
    ctx = current()
    op = "nc_find_index8"
    out = base.need_tensor(dst, "dst", op)
    _index_dtype_check(out, op, "dst")
    d, v, x, vals8, di, vi = _eight(ctx, op, data, vals)
    P = d.shape[0]
    if out.shape[0] != P or _flat(out) != 8:
        raise ShapeError(f"{op}: dst must be ({P}, 8)", rule="dst-shape", limit=(P, 8),
                         value=out.shape, where=where())
    res = None
    if ctx.numerics:
        res = np.full((P, 8), _sentinel(out.dtype), dtype=np.int64)
        for p in range(P):
            used = np.zeros(x.shape[1], bool)
            for j in range(8):
                hits = np.flatnonzero((x[p] == vals8[p, j]) & ~used)
                if hits.size:
                    res[p, j] = hits[0]
                    used[hits[0]] = True
    init = _rows_init(P, 8, di, vi)
    return emit(ctx, dst=out, values=None if res is None else res.reshape(out.shape), init=init,
                out_shape=out.shape, out_dtype=out.dtype, mask=None, engine="vector", opcode=op,
                reads=[d, v], free=x.shape[1])


def _rows_init(P, n, *inits):
    ok = None
    for i in inits:
        if i is None:
            continue
        r = np.asarray(i).reshape(P, -1).all(axis=1)
        ok = r if ok is None else ok & r
    return None if ok is None else np.repeat(ok[:, None], n, axis=1)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None):
    """``dst`` = ``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``;
    vals are processed from the last to the first, so duplicate vals pair the first matching
    position with the highest slot.  The matched positions go to ``dst_idx`` when given."""
    ctx = current()
    op = "nc_match_replace8"
    out = base.need_tensor(dst, "dst", op)
    d, v, x, vals8, di, vi = _eight(ctx, op, data, vals)
    _same_layout(d, out, op, "data", "dst")
    P, n = x.shape
    res = idx = None
    if ctx.numerics:
        res = x.copy()
        idx = np.full((P, 8), -1, dtype=np.int64)
        for p in range(P):
            replaced = np.zeros(n, bool)
            for j in range(7, -1, -1):
                hits = np.flatnonzero((x[p] == vals8[p, j]) & ~replaced)
                if hits.size:
                    replaced[hits[0]] = True
                    idx[p, j] = hits[0]
            res[p, replaced] = np.float32(imm)
    extra = []
    if dst_idx is not None:
        di_t = base.need_tensor(dst_idx, "dst_idx", op)
        _index_dtype_check(di_t, op, "dst_idx")
        base.check_writable(ctx, di_t, op)
        if di_t.shape[0] != P or _flat(di_t) != 8:
            raise ShapeError(f"{op}: dst_idx must be ({P}, 8)", rule="dst-shape", limit=(P, 8),
                             value=di_t.shape, where=where())
        if idx is not None:
            idx = np.where(idx < 0, _sentinel(di_t.dtype), idx)
        base.write(ctx, di_t, None if idx is None else idx.reshape(di_t.shape),
                   _rows_init(P, 8, di, vi) if (di is not None or vi is not None) else None)
        extra.append(di_t)
    init = base.and_init((P, n), None if di is None else di.reshape(P, n),
                         None if vi is None else np.repeat(vi.reshape(P, -1).all(axis=1)[:, None],
                                                           n, axis=1))
    return emit(ctx, dst=out, values=None if res is None else res.reshape(out.shape), init=init,
                out_shape=out.shape, out_dtype=out.dtype, mask=None, engine="vector", opcode=op,
                reads=[d, v], extra_writes=extra, free=n)


# -- cumulative tensor-scalar ------------------------------------------------------------------------

def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=ReduceCmd.reset_reduce):
    """Per partition over the flattened free elements: ``reg = op1(op0(src[i], imm0), reg)``,
    ``dst[i] = reg``; ``reg`` starts at op1's identity (reset_reduce), keeps the Vector
    accumulator's value (reduce) or loads ``imm1`` (load_reduce)."""
    ctx = current()
    op = "tensor_scalar_cumulative"
    d = base.need_tensor(dst, "dst", op)
    t = tile(ctx, src, "src", op, "vector")
    _same_layout(t, d, op, "src", "dst")
    n0, n1 = token_name(op0, "op0"), token_name(op1, "op1")
    if n1 not in _CUM_OPS:
        raise KernelError(f"{op}: op1 must be add, subtract, multiply, max or min",
                          rule="cumulative-op", limit=sorted(_CUM_OPS), value=n1, where=where())
    if n0 not in BINARY or n0 in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                  "right_shift", "logical_shift_right", "arithmetic_shift_right"):
        raise KernelError(f"{op}: op0 must be an arithmetic operator", rule="cumulative-op",
                          value=n0, where=where())
    for x in (t, d):
        if x.dtype in (dt.int32, dt.uint32):
            raise DtypeError(f"{op}: int32/uint32 tiles are not supported", rule="cumulative-dtype",
                             limit="bf16/fp16/fp32/fp8/(u)int8/(u)int16", value=dt.name(x.dtype),
                             where=where())
    cmd = _cmd(reduce_cmd)
    if cmd not in (ReduceCmd.reset_reduce, ReduceCmd.reduce, ReduceCmd.load_reduce):
        raise KernelError(f"{op}: reduce_cmd must be reset_reduce, reduce or load_reduce",
                          rule="cumulative-cmd", value=cmd.name, where=where())
    P, F = t.shape[0], _flat(t)
    v, init = read(ctx, t, op)
    s0, i0, st0 = base.scalar_or_column(ctx, imm0, (P, 1), "imm0", op, "vector")
    reads = [t] + ([st0] if st0 is not None else [])
    acc = _vector_accumulator(ctx)
    if cmd == ReduceCmd.reset_reduce:
        acc[:P] = _CUM_OPS[n1]
    elif cmd == ReduceCmd.load_reduce:
        if imm1 is None:
            raise KernelError(f"{op}: load_reduce needs imm1", rule="cumulative-imm1",
                              value="imm1=None", where=where())
        s1, i1, st1 = base.scalar_or_column(ctx, imm1, (P, 1), "imm1", op, "vector")
        if st1 is not None:
            reads.append(st1)
        acc[:P] = np.broadcast_to(np.asarray(s1, np.float32).reshape(-1), (P,))
        init = base.and_init((P, F), init, i1)
    vals = None
    if ctx.numerics:
        x = BINARY[n0](f32(v).reshape(P, F), np.asarray(s0, np.float32).reshape(-1, 1)
                       if np.ndim(s0) else s0)
        x = np.broadcast_to(x, (P, F))
        f1 = BINARY[n1]
        out = np.empty((P, F), np.float32)
        reg = acc[:P].astype(np.float32)
        for i in range(F):
            reg = np.asarray(f1(x[:, i], reg), np.float32)
            out[:, i] = reg
        acc[:P] = reg
        vals = out.reshape(d.shape)
    init = base.and_init((P, F), None if init is None else np.asarray(init).reshape(P, F), i0)
    if init is not None:
        init = np.logical_and.accumulate(init, axis=1)
    return emit(ctx, dst=d, values=vals, init=init, out_shape=d.shape, out_dtype=d.dtype, mask=None,
                engine="vector", opcode=op, reads=reads,
                attrs=(("op0", n0), ("op1", n1), ("reduce_cmd", cmd.name)))


# -- GpSimd gathers ----------------------------------------------------------------------------------

def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None):
    """GpSimd gather inside each group of 16 partitions: the group's ``index`` values, flattened
    partition-first (column-major), are element offsets into each partition's flattened free
    dims; ``num_elem_per_idx`` contiguous elements are read per index (numpy semantics of the
    SDK's local_gather example)."""
    ctx = current()
    op = "local_gather"
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, src_buffer, "src_buffer", op, "gpsimd", memories=("sbuf",))
    ix = tile(ctx, index, "index", op, "gpsimd", memories=("sbuf",))
    P = s.shape[0]
    if ix.shape[0] != P or P % 16:
        raise ShapeError(f"{op}: src_buffer and index need the same partition count, a multiple "
                         "of 16", rule="local-gather-partitions", limit="equal, multiple of 16",
                         value=(P, ix.shape[0]), where=where())
    if ix.dtype not in (dt.uint16, dt.uint32, dt.int32, dt.int16):
        raise DtypeError(f"{op}: index must be uint16", rule="index-dtype", limit="uint16",
                         value=dt.name(ix.dtype), where=where())
    e = int(num_elem_per_idx)
    if e not in (1, 2, 4, 8, 16, 32):
        raise KernelError(f"{op}: num_elem_per_idx must be 1, 2, 4, 8, 16 or 32",
                          rule="local-gather-elems", limit=(1, 2, 4, 8, 16, 32), value=e,
                          where=where())
    per_core = ix.size // (P // 16)
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < nv <= per_core or nv > 4096:
        raise KernelError(f"{op}: num_valid_indices {nv} exceeds the {per_core} indices per core",
                          rule="local-gather-valid", limit=min(per_core, 4096), value=nv,
                          where=where())
    if s.dtype != d.dtype:
        raise DtypeError(f"{op}: no dtype conversion (src_buffer {dt.name(s.dtype)}, dst "
                         f"{dt.name(d.dtype)})", rule="gather-dtype", limit=dt.name(s.dtype),
                         value=dt.name(d.dtype), where=where())
    if d.shape[0] != P or _flat(d) != nv * e:
        raise ShapeError(f"{op}: dst needs {nv * e} elements per partition", rule="dst-shape",
                         limit=(P, nv * e), value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    iv, iinit = read(ctx, ix, op)
    F = _flat(s)
    src2 = np.asarray(sv).reshape(P, F)
    idx2 = np.asarray(iv).reshape(P, -1).astype(np.int64)
    out = np.zeros((P, nv * e), dtype=src2.dtype)
    oinit = None if sinit is None else np.ones((P, nv * e), bool)
    for c in range(P // 16):
        rows = slice(16 * c, 16 * c + 16)
        offs = idx2[rows].flatten(order="F")[:nv]
        cols = (offs[:, None] + np.arange(e)[None, :]).reshape(-1)
        if (cols < 0).any() or (cols >= F).any():
            bad = int(cols[(cols < 0) | (cols >= F)][0])
            raise KernelError(f"{op}: index {bad} is outside the {F} elements of a partition",
                              rule="err_tensor_access_out_of_bound", limit=f"0..{F - 1}",
                              value=bad, where=where())
        out[rows] = src2[rows][:, cols]
        if sinit is not None:
            oinit[rows] = np.asarray(sinit).reshape(P, F)[rows][:, cols] != 0
    init = base.and_init((P, nv * e), oinit, _rows_init(P, nv * e, iinit))
    return emit(ctx, dst=d, values=out.reshape(d.shape) if ctx.numerics else None, init=init,
                out_shape=d.shape, out_dtype=d.dtype, mask=None, engine="gpsimd", opcode=op,
                reads=[s, ix], free=nv * e)


def nc_n_gather(dst, data, indices):
    """Per partition, ``dst[p, j] = data[p].flat[indices[p, j]]`` (GpSimd, SBUF only; uint32
    indices; ``dst`` None returns a new tile)."""
    return _n_gather(dst, data, indices, "nc_n_gather", 1)


def gather_flattened(data, indices, axis=0):
    """``nl.gather_flattened``: a new tile with ``out[p, b..., j...] = data[p, b..., :].flat[
    indices[p, b..., j...]]``.

    ``axis`` counts the *free* dims of ``data`` (the gather never crosses partitions, and the
    documented default ``axis=0`` is the all-free-dims flattened gather): the free dims from
    ``axis`` on are flattened and indexed, the free dims before it are batch dims that
    ``indices`` must share.  Negative values count from the last dim, as in numpy, so
    ``axis=-1`` is ``np.take_along_axis(data, indices, axis=-1)``."""
    op = "gather_flattened"
    d = base.need_tensor(data, "data", op)
    ix = base.need_tensor(indices, "indices", op)
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise KernelError(f"{op}: axis must be an integer", rule="gather-axis",
                          value=repr(axis), where=where())
    nfree = d.ndim - 1
    ax = int(axis)
    if not -nfree <= ax < nfree:
        raise ShapeError(f"{op}: axis {ax} is not a free axis of data {d.shape} (free axes count "
                         "from 0 after the partition dim; negative axes from the end; the gather "
                         "never crosses partitions)", rule="gather-axis",
                         limit=f"{-nfree}..{nfree - 1}", value=ax, where=where())
    first = ax + 1 if ax >= 0 else d.ndim + ax  # data dim where the flattened (gathered) dims start
    if first > 1 and (ix.ndim < first or tuple(ix.shape[1:first]) != tuple(d.shape[1:first])):
        raise ShapeError(f"{op}: with axis={ax}, indices {ix.shape} must share data's batch dims "
                         f"{tuple(d.shape[1:first])} after the partition dim",
                         rule="gather-batch-shape", limit=tuple(d.shape[:first]),
                         value=tuple(ix.shape), where=where())
    return _n_gather(None, d, ix, op, first)


def _n_gather(dst, data, indices, op: str, first: int):
    """The GpSimd gather: rows are (partition, batch dims ``data.shape[1:first]``), each row
    indexed over the flattened dims ``data.shape[first:]``."""
    ctx = current()
    s = tile(ctx, data, "data", op, "gpsimd", memories=("sbuf",))
    ix = tile(ctx, indices, "indices", op, "gpsimd", memories=("sbuf",))
    base.same_partitions(s, ix, op, "data", "indices")
    if not dt.is_int(ix.dtype):
        raise DtypeError(f"{op}: indices must be uint32", rule="index-dtype", limit="uint32",
                         value=dt.name(ix.dtype), where=where())
    P = s.shape[0]
    B = int(np.prod(s.shape[1:first], dtype=np.int64))  # batch rows per partition
    F = _flat(s) // B
    n = _flat(ix) // B  # indices per row
    rows = P * B
    if dst is not None:
        d = base.need_tensor(dst, "dst", op)
        if d.dtype != s.dtype:
            raise DtypeError(f"{op}: dst must have data's dtype", rule="gather-dtype",
                             limit=dt.name(s.dtype), value=dt.name(d.dtype), where=where())
        if d.shape[0] != P or _flat(d) != B * n:
            raise ShapeError(f"{op}: dst needs {B * n} elements per partition (one per index)",
                             rule="dst-shape", limit=(P, B * n), value=d.shape, where=where())
        out_shape = d.shape
    else:
        d = None
        out_shape = ix.shape
    sv, sinit = read(ctx, s, op)
    iv, iinit = read(ctx, ix, op)
    idx = np.asarray(iv).reshape(rows, n).astype(np.int64)
    bad = (idx < 0) | (idx >= F)
    if iinit is not None:
        bad &= np.asarray(iinit).reshape(rows, n) != 0
    if bad.any():
        b = int(idx[bad][0])
        unit = "a partition" if B == 1 else "a row (partition and batch dims)"
        raise KernelError(f"{op}: index {b} is outside the {F} elements of {unit}",
                          rule="err_tensor_access_out_of_bound", limit=f"0..{F - 1}", value=b,
                          where=where())
    idx = np.clip(idx, 0, F - 1)
    vals = np.take_along_axis(np.asarray(sv).reshape(rows, F), idx, axis=1) if ctx.numerics \
        else None
    init = None
    if sinit is not None or iinit is not None:
        g = np.ones((rows, n), bool) if sinit is None else \
            np.take_along_axis(np.asarray(sinit).reshape(rows, F) != 0, idx, axis=1)
        init = base.and_init((rows, n), g,
                             None if iinit is None else np.asarray(iinit).reshape(rows, n))
    return emit(ctx, dst=d, values=None if vals is None else vals.reshape(out_shape),
                init=None if init is None else init.reshape(out_shape), out_shape=out_shape,
                out_dtype=s.dtype, mask=None, engine="gpsimd", opcode="nc_n_gather",
                reads=[s, ix], free=B * n)


# -- GpSimd scans ----------------------------------------------------------------------------------

def nonzero_with_count(dst, src, index_offset=0, padding_val=-1):
    """On partitions 0, 16, ..., 112 only: the positions of nonzero elements (+ ``index_offset``),
    then ``padding_val``, then the count in the extra last element (gen3+, SBUF, int32 dst)."""
    ctx = current()
    op = "nonzero_with_count"
    _gen(ctx, 3, op)
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, src, "src", op, "gpsimd", memories=("sbuf",))
    if d._st.memory != "sbuf":
        raise KernelError(f"{op}: dst must be in SBUF", rule="nonzero-memory", limit="sbuf",
                          value=d._st.memory, where=where())
    if s.dtype not in (dt.float32, dt.int32):
        raise DtypeError(f"{op}: src must be float32 or int32", rule="nonzero-dtype",
                         limit="float32/int32", value=dt.name(s.dtype), where=where())
    if d.dtype != dt.int32:
        raise DtypeError(f"{op}: dst must be int32", rule="nonzero-dtype", limit="int32",
                         value=dt.name(d.dtype), where=where())
    P, T = s.shape[0], _flat(s)
    if d.shape[0] != P or _flat(d) != T + 1:
        raise ShapeError(f"{op}: dst needs {P} partitions and {T + 1} elements per partition",
                         rule="dst-shape", limit=(P, T + 1), value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    x = f32(sv).reshape(P, T) if s.dtype == dt.float32 else np.asarray(sv).reshape(P, T)
    rows = list(range(0, P, 16))
    out = np.zeros((P, T + 1), dtype=np.int64)
    mask = np.zeros((P, T + 1), bool)
    for p in rows:
        nz = np.flatnonzero(x[p] != 0)
        out[p, :] = int(padding_val)
        out[p, :nz.size] = nz + int(index_offset)
        out[p, T] = nz.size
        mask[p] = True
    init = None
    if sinit is not None:
        ok = np.asarray(sinit).reshape(P, T).all(axis=1)
        init = np.repeat(ok[:, None], T + 1, axis=1)
    return emit(ctx, dst=d, values=out.reshape(d.shape) if ctx.numerics else None,
                init=None if init is None else init.reshape(d.shape), out_shape=d.shape,
                out_dtype=d.dtype, mask=mask.reshape(d.shape), engine="gpsimd", opcode=op,
                reads=[s], partitions=len(rows), free=T)


def sequence_bounds(dst, segment_ids):
    """For segment ids (1, n) (0 = padding), each element's [start, end) segment bounds as a
    (1, 2, n) tile: row 0 starts (n for padding), row 1 ends (-1 for padding); GpSimd."""
    ctx = current()
    op = "sequence_bounds"
    d = base.need_tensor(dst, "dst", op)
    s = tile(ctx, segment_ids, "segment_ids", op, "gpsimd", memories=("sbuf",))
    for t, role in ((s, "segment_ids"), (d, "dst")):
        if t.dtype not in (dt.float32, dt.int32):
            raise DtypeError(f"{op}: {role} must be float32 or int32", rule="sequence-bounds-dtype",
                             limit="float32/int32", value=dt.name(t.dtype), where=where())
    if s.shape[0] != 1:
        raise ShapeError(f"{op}: the partition dim must be 1", rule="sequence-bounds-partitions",
                         limit=1, value=s.shape[0], where=where())
    n = _flat(s)
    if d.shape[0] != 1 or _flat(d) != 2 * n:
        raise ShapeError(f"{op}: dst must be (1, 2, {n})", rule="dst-shape", limit=(1, 2, n),
                         value=d.shape, where=where())
    sv, sinit = read(ctx, s, op)
    seq = f32(sv).reshape(-1)
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    for i in range(n):
        if seq[i] == 0:
            lo[i] = n
        elif i > 0 and seq[i] == seq[i - 1]:
            lo[i] = lo[i - 1]
        else:
            lo[i] = i
    for i in range(n - 1, -1, -1):
        if seq[i] == 0:
            hi[i] = -1
        elif i < n - 1 and seq[i] == seq[i + 1]:
            hi[i] = hi[i + 1]
        else:
            hi[i] = i + 1
    vals = np.stack([lo, hi]).reshape(d.shape) if ctx.numerics else None
    init = None if sinit is None else np.repeat(np.asarray(sinit).reshape(1, 1, n) != 0, 2,
                                                axis=1).reshape(d.shape)
    return emit(ctx, dst=d, values=vals, init=init, out_shape=d.shape, out_dtype=d.dtype,
                mask=None, engine="gpsimd", opcode=op, reads=[s], free=n)
