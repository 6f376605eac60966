"""Capture with ``torch.export`` on the meta device: one ``CapturedOp`` per operator node of the graph.

The export graph keeps high-level aten ops (``linear``, ``layer_norm``, ``scaled_dot_product_attention``),
which is what the op classes and ``to_ops`` want.  The torch-neuronx list names dispatcher-level ops
(``addmm``, ``t``, ``_softmax``), so each node also records what it runs as at that level (``lowers_to``).
"""
from __future__ import annotations

import operator
import warnings
from typing import Any, Dict, Iterator, List, Sequence, Tuple

from .records import CapturedOp, TensorSpec, dtype_name, loc_from_stack_trace, plain


def export_program(model, inputs: Sequence[Any]):
    """``torch.export.export`` of ``model`` on ``inputs`` (non-strict: runs the Python code on fake tensors)."""
    import torch
    from .cudameta import cuda_to_meta_mode
    with cuda_to_meta_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations, nothing the user can act on
        return torch.export.export(model, tuple(inputs), strict=False)


def op_parts(target) -> Tuple[str, str, str]:
    """(namespace, name, overload) of an ``OpOverload``; ``("", str(target), "")`` for anything else."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        ns = "higher_order" if hasattr(target, "namespace") else ""  # torch.cond, while_loop, ...
        return ns, getattr(target, "__name__", str(target)), ""
    ns, _, name = schema.name.partition("::")
    return ns, name, schema.overload_name or "default"


def arg_names(target) -> Tuple[str, ...]:
    """The schema's argument names of an operator (empty for Python callables)."""
    schema = getattr(target, "_schema", None)
    return tuple(a.name for a in schema.arguments) if schema is not None else ()


def _spec(val) -> Any:
    """A node's ``meta['val']`` as TensorSpec(s) or a plain value."""
    if hasattr(val, "shape") and hasattr(val, "dtype"):
        return TensorSpec(tuple(int(d) for d in val.shape), dtype_name(val.dtype))
    if isinstance(val, (list, tuple)):
        return tuple(_spec(v) for v in val)
    return plain(val)


def _arg(a) -> Any:
    import torch.fx
    if isinstance(a, torch.fx.Node):
        return _spec(a.meta.get("val"))
    if isinstance(a, (list, tuple)):
        return tuple(_arg(x) for x in a)
    return plain(a)


def _outputs(val) -> Tuple[TensorSpec, ...]:
    s = _spec(val)
    if isinstance(s, TensorSpec):
        return (s,)
    if isinstance(s, tuple):
        return tuple(x for x in s if isinstance(x, TensorSpec))
    return ()


def _module_path(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return path if isinstance(path, str) else ""


def walk_nodes(gm) -> Iterator[Any]:
    """Operator nodes of a graph module in order, with the bodies of higher-order ops (``with
    torch.no_grad()`` regions, ``cond`` branches) walked in place; a control-flow op other than the
    ``wrap_*`` scopes is yielded too, so the report can name it."""
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        if getattr(n.target, "_schema", None) is not None:
            yield n
            continue
        subs = [gm.get_submodule(a.target) for a in n.args if getattr(a, "op", None) == "get_attr"
                and hasattr(gm.get_submodule(a.target), "graph")]
        if not getattr(n.target, "__name__", "").startswith("wrap_"):
            yield n
        for sub in subs:
            yield from walk_nodes(sub)


def lowerings(program) -> Dict[Any, Tuple[str, ...]]:
    """Export node -> the dispatcher-level aten ops it runs as (``linear`` -> ``t``, ``addmm``), found
    by calling each distinct op once on empty meta tensors under a recording TorchDispatchMode: the level
    an XLA backend such as torch-neuronx sees, after the CompositeImplicitAutograd decompositions."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: List[str] = []

    class Record(TorchDispatchMode):
        """Note each operator reaching the dispatcher, then run it."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(_qual(func))
            return func(*args, **(kwargs or {}))

    def real(a):
        if isinstance(a, torch.fx.Node):
            return _empty(a.meta.get("val"))
        if isinstance(a, (list, tuple)):
            return type(a)(real(x) for x in a)
        return a

    cache: Dict[tuple, Tuple[str, ...]] = {}
    out: Dict[Any, Tuple[str, ...]] = {}
    for n in walk_nodes(program.graph_module):
        if getattr(n.target, "_schema", None) is None:
            continue
        strides = tuple(tuple(a.meta["val"].stride()) if isinstance(a, torch.fx.Node) and
                        isinstance(a.meta.get("val"), torch.Tensor) else None for a in n.args)
        key = (str(n.target), repr(_arg(tuple(n.args))), repr(_arg(tuple(n.kwargs.items()))), strides)
        if key not in cache:
            try:
                args, kwargs = real(n.args), {k: real(v) for k, v in n.kwargs.items()}  # made outside the mode
                seen.clear()
                with torch.no_grad(), Record():
                    n.target(*args, **kwargs)
                cache[key] = tuple(dict.fromkeys(seen))
            except Exception:  # an op that cannot run on empty meta tensors: lowering unknown
                cache[key] = ()
        out[n] = cache[key]
    return out


def _empty(val):
    """An empty meta tensor shaped and strided like a node's fake value (a transposed input stays
    non-contiguous, so ``contiguous`` still copies); lists element-wise, scalars as they are."""
    import torch
    if isinstance(val, torch.Tensor):
        return torch.empty_strided(tuple(int(d) for d in val.shape), tuple(int(d) for d in val.stride()),
                                   dtype=val.dtype, device="meta")
    if isinstance(val, (list, tuple)):
        return type(val)(_empty(v) for v in val)
    try:
        return int(val)  # SymInt with a hint
    except Exception:
        return val


def _qual(target) -> str:
    ns, name, _ = op_parts(target)
    return f"{ns}::{name}" if ns else name


def records_from_program(program, prefer_files: Sequence[str] = (), decompose: bool = True) -> List[CapturedOp]:
    """Every operator node of an ``ExportedProgram`` as a ``CapturedOp`` (getitem and placeholders skipped)."""
    lowered = lowerings(program) if decompose else {}
    ops: List[CapturedOp] = []
    for node in walk_nodes(program.graph_module):
        ns, name, overload = op_parts(node.target)
        ops.append(CapturedOp(
            namespace=ns or "python", name=name, overload=overload,
            args=tuple(_arg(a) for a in node.args),
            kwargs=tuple((k, _arg(v)) for k, v in node.kwargs.items()),
            outputs=_outputs(node.meta.get("val")),
            module=_module_path(node),
            loc=loc_from_stack_trace(node.meta.get("stack_trace") or "", prefer_files),
            lowers_to=lowered.get(node, ()),
            arg_names=arg_names(node.target),
        ))
    return ops
