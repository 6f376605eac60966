"""A captured graph as ``trnsim.model.ops.Op`` records, so a user's model is estimated like a zoo model.

Shapes come from the capture (meta tensors), FLOPs from hand formulas: matmul 2*m*k*n per batch,
attention 2*B*H*Lq*Lkv*(D+Dv) (halved when causal and Lq == Lkv, as trnsim/model/transformer.py counts
it), vector ops FLOPs-per-element from ``data/op_classes.toml``.  Bytes are every tensor read plus every
tensor written.  Views and constants cost nothing and are dropped; ops with no cost rule are returned
by ``uncosted`` (and make ``to_ops(strict=True)`` raise).
"""
from __future__ import annotations

from math import prod
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ...errors import UnsupportedError
from ...model.ops import Op
from .classify import OP_CLASSES_FILE, SUPPORTED_FILE, OpClass, OpTables, load_tables
from .records import CapturedOp, TensorSpec, dtype_itemsize
from .report import is_bookkeeping

_FLOAT = ("float", "bfloat")  # dtype name prefixes an activation-dtype override applies to


def _ops_of(source: Any) -> Sequence[CapturedOp]:
    """CapturedOp list from a CompatReport, an ExportedProgram or a list of CapturedOp."""
    if hasattr(source, "ops") and not hasattr(source, "graph_module"):
        return source.ops
    if hasattr(source, "graph_module"):  # torch.export.ExportedProgram
        from .capture_export import records_from_program
        return records_from_program(source, decompose=False)
    return list(source)


def _bytes_fn(dtype: Optional[str]) -> Callable[[TensorSpec], int]:
    """Bytes of a tensor, with float tensors counted at ``dtype`` when an override is given."""
    if dtype is None:
        return lambda t: t.nbytes
    size = dtype_itemsize(dtype)
    return lambda t: t.numel * (size if t.dtype.startswith(_FLOAT) else t.itemsize)


def _name(op: CapturedOp) -> str:
    return f"{op.module}:{op.name}" if op.module else op.name


def _matmul_mkn(op: CapturedOp) -> Tuple[int, int, int, int]:
    """(batch, m, k, n) of a matmul-class op, from its operand shapes."""
    ts = op.tensor_args()
    name = op.name.rstrip("_")
    if name == "linear":
        x, w = ts[0], ts[1]
        k = x.shape[-1]
        return 1, x.numel // k, k, w.shape[0]
    if name in ("addmm", "_addmm_activation", "addbmm", "baddbmm", "addmv"):
        ts = ts[1:]  # the first tensor is the bias / accumulator
    a, b = ts[0], ts[1]
    if len(b.shape) == 1:  # matrix-vector
        k = b.shape[0]
        return 1, a.numel // k, k, 1
    if len(a.shape) == 1:
        return 1, 1, a.shape[0], b.shape[-1]
    k, n = b.shape[-2], b.shape[-1]
    if len(b.shape) == 2:  # weights shared across every leading dim: fold them into m
        return 1, a.numel // k, k, n
    batch = prod(op.outputs[0].shape[:-2]) if op.outputs else prod(a.shape[:-2])
    if name == "addbmm":
        batch = a.shape[0]
    return batch, a.shape[-2], k, n


def _rows_cols(t: TensorSpec, dim: int = -1) -> Tuple[int, int]:
    cols = t.shape[dim] if t.shape else 1
    return (t.numel // cols if cols else 0), cols


def one_op(op: CapturedOp, cls: OpClass, dtype: Optional[str] = None) -> Optional[Op]:
    """The ``Op`` of one captured call (None for views and constants, which cost nothing)."""
    if cls.op_kind is None:
        return None
    nbytes = _bytes_fn(dtype)
    ins, outs = op.tensor_args(), op.outputs
    moved = float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs))
    first = ins[0] if ins else (outs[0] if outs else TensorSpec((), "float32"))
    dt = dtype if dtype and first.dtype.startswith(_FLOAT) else first.dtype
    kind, name = cls.op_kind, _name(op)
    if kind == "matmul":
        if op.name == "einsum":
            return None
        batch, m, k, n = _matmul_mkn(op)
        return Op(kind="matmul", name=name, dtype=dt, m=m, k=k, n=n, batch=batch,
                  flops=2.0 * batch * m * k * n, bytes=moved)
    if kind == "attention":
        q, kk, v = ins[0], ins[1], ins[2]
        heads = prod(q.shape[:-2])  # batch x heads: independent attention problems
        lq, lkv, d, dv = q.shape[-2], kk.shape[-2], q.shape[-1], v.shape[-1]
        causal = bool(op.get("is_causal", False)) and lq > 1
        frac = 0.5 if causal and lq == lkv else 1.0
        kv_heads = prod(kk.shape[:-2])  # fewer than heads: grouped-query attention (enable_gqa)
        return Op(kind="attention", name=name, dtype=dt, q_len=lq, kv_len=lkv, head_dim=d, heads=heads,
                  causal=causal, batch=1, flops=2.0 * heads * lq * lkv * (d + dv) * frac, bytes=moved,
                  kv_heads=kv_heads if kv_heads and heads % kv_heads == 0 else heads)
    if kind == "embedding":  # a gather: each looked-up row is read from the table and written out
        w, idx = ins[0], ins[1]
        row_bytes = nbytes(TensorSpec(w.shape[-1:], w.dtype))
        return Op(kind="embedding", name=name, dtype=dt if dtype else w.dtype, rows=idx.numel, cols=w.shape[-1],
                  flops=0.0, bytes=float(2 * idx.numel * row_bytes + nbytes(idx)))
    if kind == "norm":
        shape = op.get("normalized_shape")
        cols = prod(shape) if isinstance(shape, tuple) and shape else first.shape[-1]
        rows = first.numel // cols if cols else 0
    elif kind == "softmax":
        dim = op.get("dim", -1)
        rows, cols = _rows_cols(first, dim if isinstance(dim, int) else -1)
    elif cls.name == "reduction":
        rows, cols = _rows_cols(first)
    else:
        rows, cols = _rows_cols(outs[0] if outs else first)
    return Op(kind=kind, name=name, dtype=dt, rows=rows, cols=cols,
              flops=cls.flops_per_element * rows * cols, bytes=moved)


def uncosted(source: Any, tables: Optional[OpTables] = None) -> List[CapturedOp]:
    """The captured calls no cost rule covers (outside aten, unknown aten ops, convolutions, einsum)."""
    tables = tables or load_tables(OP_CLASSES_FILE, SUPPORTED_FILE)
    out = []
    for op in _ops_of(source):
        if is_bookkeeping(op):
            continue
        cls = tables.op_class(op)
        if cls is None or not cls.costable or (cls.op_kind == "matmul" and op.name == "einsum"):
            out.append(op)
    return out


def to_ops(source: Any, dtype: Optional[str] = None, strict: bool = False,
           tables: Optional[OpTables] = None) -> List[Op]:
    """``Op`` list of a CompatReport / ExportedProgram / CapturedOp list; ``dtype`` (e.g. "bfloat16")
    overrides float tensors' dtype; ``strict`` raises when an op has no cost rule instead of skipping it."""
    tables = tables or load_tables(OP_CLASSES_FILE, SUPPORTED_FILE)
    missing = uncosted(source, tables)
    if strict and missing:
        names = sorted({m.qualname for m in missing})
        first = next((m for m in missing if m.loc), None)
        raise UnsupportedError(f"{len(missing)} operator call(s) have no trnsim cost rule: {', '.join(names)}",
                               rule="uncostable-op", limit="ops of a costable class", value=names,
                               where=str(first.loc) if first else None,
                               hint="estimate without them (strict=False) or replace them with aten ops")
    skip = {id(m) for m in missing}
    out: List[Op] = []
    for op in _ops_of(source):
        if id(op) in skip or is_bookkeeping(op):
            continue
        o = one_op(op, tables.op_class(op), dtype)
        if o is not None:
            out.append(o)
    return out
