"""Why a graph is new: the first call that differs from the previous step's graph, naming the tensor whose
shape changed and the user's line (the recompilation pitfall of torch_xla)."""
from __future__ import annotations

import linecache
import re
from typing import Optional, Sequence

from ..torch.capture_export import arg_names
from ..torch.records import TensorSpec
from .recorder import Call, short_loc

_ASSIGN = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?:,[^=]*)?=[^=]")  # `x = ...` / `x, y = ...`


def _line_text(loc) -> str:
    if not loc:
        return ""
    return linecache.getline(loc[0], loc[1]).strip()


def _where(call: Call) -> str:
    text = _line_text(call.loc)
    return short_loc(call.loc) + (f" `{text}`" if text else "")


def _shape_change(a: Call, b: Call) -> Optional[str]:
    """'tensor `input` (8, 37) -> (8, 41)' for the first tensor argument whose shape differs."""
    names = arg_names(b.func)
    for i, (x, y) in enumerate(zip(a.args, b.args)):
        if isinstance(x, TensorSpec) and isinstance(y, TensorSpec) and x.shape != y.shape:
            nm = names[i] if i < len(names) else f"arg{i}"
            return f"tensor `{nm}` {tuple(x.shape)} -> {tuple(y.shape)}"
    for x, y in zip(a.outputs, b.outputs):
        if x.shape != y.shape:
            m = _ASSIGN.match(_line_text(b.loc))
            what = f"tensor `{m.group(1)}`" if m else f"the result of {str(b.func).replace('.default', '')}"
            return f"{what} {tuple(x.shape)} -> {tuple(y.shape)}"
    return None


def why_new(prev: Sequence[Call], new: Sequence[Call]) -> str:
    """One line saying where ``new`` first departs from ``prev`` (what made it a new graph)."""
    for i, (a, b) in enumerate(zip(prev, new)):
        if a.key() == b.key():
            continue
        op = str(b.func).replace(".default", "")
        if str(a.func) == str(b.func):
            change = _shape_change(a, b) or "arguments changed"
            return f"{change} of {op} at {_where(b)}"
        return f"op #{i} is {op} instead of {str(a.func).replace('.default', '')} at {_where(b)}"
    if len(new) > len(prev):
        return f"{len(new) - len(prev)} more ops from {_where(new[len(prev)])}"
    if len(new) < len(prev):
        return f"{len(prev) - len(new)} fewer ops (graph ends after {_where(new[-1])})" if new else "empty graph"
    return "same structure"
