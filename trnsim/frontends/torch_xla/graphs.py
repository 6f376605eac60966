"""A recorded graph (the calls between two ``mark_step``s) as the model layer's ``Op`` records.

Forward ops go through the torch front end's classes and cost rules (``graph_ops.one_op``), so a step and
``trnsim check`` cost an operator the same way; the backward, optimizer and AMP kernels a training step
adds come from ``data/xla_ops.toml``; ``c10d`` calls become collectives.  Ops neither table covers are
returned as having no Trainium lowering.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from ...errors import ConfigError
from ...model.ops import Op
from ..torch.capture_export import arg_names, op_parts
from ..torch.classify import base_name, load_tables
from ..torch.graph_ops import one_op
from ..torch.records import CapturedOp, Loc, TensorSpec
from ..torch.report import is_bookkeeping
from .recorder import OPTIMIZER_MARK, Call

try:
    import tomllib as _toml
except ImportError:  # Python 3.10
    import tomli as _toml  # type: ignore

XLA_OPS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "xla_ops.toml")
# c10d operator -> the model layer's collective name (sizes as nccl-tests count them)
_C10D = {"allreduce": "all-reduce", "allreduce_coalesced": "all-reduce", "allgather": "all-gather",
         "_allgather_base": "all-gather", "reduce_scatter": "reduce-scatter", "_reduce_scatter_base": "reduce-scatter",
         "broadcast": "broadcast", "alltoall": "all-to-all", "alltoall_base": "all-to-all"}


@dataclass(frozen=True)
class Item:
    """One costed operator call: the Op, how many times its cost counts, its phase and user line."""
    op: Op
    count: float
    phase: str
    qualname: str
    loc: Optional[Tuple[str, int, str]]


@dataclass(frozen=True)
class Collective:
    """A collective the step ran (``xm.all_reduce``, ``optimizer_step``'s gradient reduction, DDP)."""
    op: str
    bytes: float
    phase: str
    loc: Optional[Tuple[str, int, str]]
    after: int = 0     # how many costed items precede it in program order


@dataclass(frozen=True)
class GraphOps:
    """A graph's costable items, collectives, the calls with no Trainium lowering, and its token count."""
    items: Tuple[Item, ...]
    collectives: Tuple[Collective, ...]
    unlowered: Tuple[Tuple[str, Optional[Tuple[str, int, str]]], ...]
    tokens: int
    grad_bytes: float = 0.0    # gradient bytes of the parameters the optimizer step updated
    grad_at: Optional[Collective] = None   # where a data-parallel gradient all-reduce would be issued


@dataclass(frozen=True)
class _Rule:
    rule: str
    count: float
    kind: str = ""
    arg: int = 0


@lru_cache(maxsize=4)
def load_rules(path: str = XLA_OPS_FILE) -> Dict[str, _Rule]:
    """Operator name -> its training-step cost rule, from ``data/xla_ops.toml`` (or a user's file);
    with ``[fusion] casts`` on, dtype casts get the ``free`` rule (fused into their consumer)."""
    try:
        with open(path, "rb") as f:
            raw = _toml.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {path}: {e}", rule="xla-op-rules", limit="a readable TOML file",
                          value=str(e)) from None
    out: Dict[str, _Rule] = {}
    for body in raw.get("ops", {}).values():
        cnt = body.get("count", 1.0)
        r = _Rule(rule=body["rule"], count=float(cnt["value"] if isinstance(cnt, dict) else cnt),
                  kind=body.get("kind", ""), arg=int(body.get("arg", 0)))
        for name in body.get("ops", ()):
            out[name] = r
    fusion = raw.get("fusion", {})
    if _on(fusion.get("casts", False)):
        for name in fusion.get("cast_ops", ()):
            out[name] = _Rule(rule="free", count=0.0)
    if _on(fusion.get("optimizer", False)):
        out[OPTIMIZER_MARK] = _Rule(rule="fused_optimizer", count=1.0)
    return out


def _on(v) -> bool:
    return bool(v.get("value", False) if isinstance(v, dict) else v)


def fused_optimizer_op(params: int) -> Op:
    """The model layer's fused AdamW op over ``params`` parameters (what XLA makes of the update)."""
    from ...model.datafiles import figure
    from ...model.transformer import optimizer_graph
    per = float(figure("estimator", "training.optimizer_hbm_bytes_per_param"))
    return optimizer_graph(params, per).ops[0].op


def captured(call: Call) -> CapturedOp:
    """The torch front end's record of one call (for its classes and cost rules)."""
    ns, name, overload = op_parts(call.func)
    loc = Loc(*call.loc) if call.loc else None
    return CapturedOp(namespace=ns or "python", name=name, overload=overload, args=call.args, kwargs=call.kwargs,
                      outputs=call.outputs, loc=loc, arg_names=arg_names(call.func))


def _vector(kind: str, t: TensorSpec, name: str, moved: float) -> Op:
    cols = t.shape[-1] if t.shape else 1
    rows = t.numel // cols if cols else 0
    return Op(kind=kind, name=name, dtype=t.dtype, rows=rows, cols=cols, flops=float(t.numel), bytes=moved)


def _extra_op(cop: CapturedOp, rule: _Rule) -> Optional[Tuple[Op, float]]:
    """(Op, count) of a backward / optimizer / AMP kernel by its rule; None for free ops."""
    ts = cop.tensor_args()
    moved = float(sum(t.nbytes for t in ts) + sum(t.nbytes for t in cop.outputs))
    name = cop.qualname
    if rule.rule == "free" or not ts:
        return None
    if rule.rule == "attention_backward":
        fwd = CapturedOp("aten", "scaled_dot_product_attention", "default", tuple(ts[1:4]),
                         (("is_causal", cop.get("is_causal", False)),), (ts[1],))
        op = one_op(fwd, load_tables().by_op["scaled_dot_product_attention"])
        return (dataclasses.replace(op, name=name), rule.count) if op else None
    if rule.rule == "vector_backward":
        t = ts[min(rule.arg, len(ts) - 1)]
        return _vector(rule.kind, t, name, moved / rule.count), rule.count
    if rule.rule == "embedding_backward":
        g, idx = ts[0], ts[1]
        cols = g.shape[-1] if g.shape else 1
        return Op(kind="embedding", name=name, dtype=g.dtype, rows=idx.numel, cols=cols, flops=0.0,
                  bytes=moved), rule.count
    # foreach: one pass over every tensor of the first list
    first = next((a for a in cop.args if isinstance(a, tuple)), tuple(ts))
    n = sum(t.numel for t in first if isinstance(t, TensorSpec))
    dt = ts[0].dtype
    return Op(kind="elementwise", name=name, dtype=dt, rows=n, cols=1, flops=float(n), bytes=moved), rule.count


def _collective(cop: CapturedOp, call: Call, after: int) -> Optional[Collective]:
    kind = _C10D.get(base_name(cop.name))
    if kind is None:
        return None
    ts = cop.tensor_args()
    size = float(sum(t.nbytes for t in (cop.outputs if kind == "all-gather" else ts)))
    if kind == "all-gather" and not cop.outputs:
        size = float(sum(t.nbytes for t in ts))
    return Collective(kind, size, call.phase, call.loc, after)


def graph_ops(calls: Sequence[Call], rules: Optional[Dict[str, _Rule]] = None) -> GraphOps:
    """Cost records of one recorded graph."""
    tables = load_tables()
    rules = load_rules() if rules is None else rules
    items: List[Item] = []
    colls: List[Collective] = []
    unlowered = []
    tokens = 0
    grad_bytes = 0.0
    grad_at: Optional[Collective] = None
    fused = OPTIMIZER_MARK in rules and any(c.func == OPTIMIZER_MARK for c in calls)
    for call in calls:
        if call.func == OPTIMIZER_MARK:
            grad_bytes += float(call.args[1]) if len(call.args) > 1 else 0.0
            if grad_at is None:   # before the update that needs the reduced gradients
                grad_at = Collective("all-reduce", 0.0, call.phase, call.loc, len(items))
            if fused:
                items.append(Item(fused_optimizer_op(int(call.args[0])), 1.0, call.phase, "xla::fused_adamw",
                                  call.loc))
            continue
        if fused and call.phase == "optimizer" and getattr(call.func, "namespace", "") != "c10d":
            continue   # the update's ops are the fused optimizer op; its gradient all-reduce is not
        cop = captured(call)
        if is_bookkeeping(cop):
            continue
        if cop.namespace == "c10d":
            c = _collective(cop, call, len(items))
            if c is not None:
                colls.append(c)
            continue
        rule = rules.get(base_name(cop.name)) if cop.namespace == "aten" else None
        if rule is not None:
            oc = _extra_op(cop, rule)
            if oc is not None:
                items.append(Item(oc[0], oc[1], call.phase, cop.qualname, call.loc))
            continue
        cls = tables.op_class(cop)
        if cls is None or not cls.costable or (cls.op_kind == "matmul" and cop.name == "einsum"):
            unlowered.append((cop.qualname, call.loc))
            continue
        op = one_op(cop, cls)
        if op is None:
            continue
        if op.kind == "embedding" and call.phase == "forward":
            tokens = max(tokens, op.rows)
        items.append(Item(op, 1.0, call.phase, cop.qualname, call.loc))
    if grad_at is not None:
        grad_at = dataclasses.replace(grad_at, bytes=grad_bytes)
    return GraphOps(tuple(items), tuple(colls), tuple(unlowered), tokens, grad_bytes, grad_at)
