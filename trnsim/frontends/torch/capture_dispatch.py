"""Fallback capture when ``torch.export`` fails: run the model eagerly on meta tensors under a
``TorchDispatchMode`` and record every operator call at the dispatcher level (``linear`` is already
``t`` + ``addmm`` there, the spelling of the torch-neuronx list).

Module names come from global forward hooks; source lines from the Python stack at each call.
"""
from __future__ import annotations

import dataclasses
import sys
import traceback
from typing import Any, List, Optional, Sequence

from .errors import CaptureError
from .records import CapturedOp, TensorSpec, dtype_name, is_library_file, pick_user_frame, plain


def _spec(x) -> Any:
    import torch
    if isinstance(x, torch.Tensor):
        return TensorSpec(tuple(int(d) for d in x.shape), dtype_name(x.dtype))
    if isinstance(x, (list, tuple)):
        return tuple(_spec(v) for v in x)
    return plain(x)


def _stack_loc(prefer: Sequence[str]):
    """The user's line at this moment: innermost frame in a preferred file, else outside any library."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    frames.reverse()
    return pick_user_frame(frames, prefer)


class _Recorder:
    """Holds the records and the current module path while the model runs."""

    def __init__(self, model, prefer: Sequence[str]):
        self.names = {id(m): n for n, m in model.named_modules()}
        self.stack: List[str] = []
        self.prefer = list(prefer)
        self.ops: List[CapturedOp] = []
        self.current: Optional[CapturedOp] = None  # the call under way, named if its kernel fails
        self.inner: Optional[List[str]] = None     # inside a kept composite op: its dispatcher-level ops

    def pre(self, mod, _inputs):
        self.stack.append(self.names.get(id(mod), self.stack[-1] if self.stack else ""))

    def post(self, _mod, _inputs, _out):
        if self.stack:
            self.stack.pop()


def dispatch_trace(model, inputs: Sequence[Any], prefer_files: Sequence[str] = ()) -> List[CapturedOp]:
    """Run ``model(*inputs)`` on meta tensors and return one ``CapturedOp`` per dispatched operator call."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from .capture_export import arg_names, op_parts
    from .cudameta import cuda_to_meta_mode

    rec = _Recorder(model, prefer_files)

    class Mode(TorchDispatchMode):
        """Record each aten call with its shapes, module and user line, then run it on meta."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            ns, name, overload = op_parts(func)
            if rec.inner is not None:  # part of a kept composite: its lowering, not an op of its own
                rec.inner.append(f"{ns}::{name}")
                return func(*args, **kwargs)
            rec.current = CapturedOp(
                namespace=ns or "python", name=name, overload=overload,
                args=tuple(_spec(a) for a in args), kwargs=tuple((k, _spec(v)) for k, v in kwargs.items()),
                outputs=(), module=rec.stack[-1] if rec.stack else "", loc=_stack_loc(rec.prefer),
                arg_names=arg_names(func))
            out = func(*args, **kwargs)
            flat = out if isinstance(out, (list, tuple)) else (out,)
            outs = tuple(s for s in (_spec(o) for o in flat) if isinstance(s, TensorSpec))
            rec.ops.append(dataclasses.replace(rec.current, outputs=outs))
            rec.current = None
            return out

    from torch.overrides import TorchFunctionMode
    keep = {torch.nn.functional.scaled_dot_product_attention: ("scaled_dot_product_attention", "default")}

    class Keep(TorchFunctionMode):
        """Record attention as one op, as torch.export does: on meta it would dispatch as its math
        decomposition (bmm, softmax), which has neither the attention class nor causal halving."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func not in keep or rec.inner is not None:
                return func(*args, **kwargs)
            name, overload = keep[func]
            schema = getattr(torch.ops.aten, name).default
            rec.current = CapturedOp(
                namespace="aten", name=name, overload=overload, args=tuple(_spec(a) for a in args),
                kwargs=tuple((k, _spec(v)) for k, v in kwargs.items()), outputs=(),
                module=rec.stack[-1] if rec.stack else "", loc=_stack_loc(rec.prefer), arg_names=arg_names(schema))
            rec.inner = []
            try:
                out = func(*args, **kwargs)
                op = dataclasses.replace(rec.current, outputs=(_spec(out),), lowers_to=tuple(dict.fromkeys(rec.inner)))
            finally:
                rec.inner = None
            rec.ops.append(op)
            rec.current = None
            return out

    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    h1 = register_module_forward_pre_hook(rec.pre)
    h2 = register_module_forward_hook(rec.post)
    try:
        with torch.no_grad(), cuda_to_meta_mode(), Keep(), Mode():
            model(*inputs)
    except Exception as e:
        raise capture_error(e, rec.current, prefer_files) from None
    finally:
        h1.remove()
        h2.remove()
    return rec.ops


def capture_error(exc: BaseException, op: Optional[CapturedOp], prefer_files: Sequence[str]) -> CaptureError:
    """A CaptureError naming the failing operator (when one was being run) and the user's line."""
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    loc = pick_user_frame(frames, prefer_files) or (op.loc if op else None)
    what = f"operator {op.qualname}" if op is not None else "the model's Python code"
    hint = None
    if op is not None and "meta" in str(exc).lower():
        hint = (f"{op.qualname} has no meta/fake implementation; register one with "
                "torch.library.register_fake so it can be traced without data")
    return CaptureError(f"the model does not trace on the meta device: {what} failed with "
                        f"{type(exc).__name__}: {_first_line(exc)}", rule="capture",
                        limit="every op traceable on meta tensors", value=op.qualname if op else type(exc).__name__,
                        where=f"{loc.file}:{loc.line} in {loc.function}" if loc else None, hint=hint)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


__all__ = ["dispatch_trace", "capture_error", "is_library_file"]
