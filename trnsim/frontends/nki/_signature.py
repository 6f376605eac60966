"""Public wrappers generated from a signature table: one row per ``nki.isa`` / ``nki.language`` call.

A row names the call, its parameters with their defaults (as the real API spells them), what it
calls, and its docstring.  ``build`` writes each wrapper once, as plain Python source (the way
``dataclasses`` writes ``__init__``), so a call costs no more than a hand-written wrapper, and does
the checks every call shares in one place: unknown keywords and ``mask=`` are rejected, enum
parameters are converted (``ENUM_PARAMS``), tensor parameters are checked, and ISA results become
instruction handles.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Dict, Iterable, Tuple


@dataclasses.dataclass(frozen=True)
class Row:
    """One public call: ``params`` as in a ``def`` line, ``call`` an expression over them."""
    name: str
    params: str
    call: str
    doc: str
    tensors: Tuple[str, ...] = ("dst",)  # parameters that must be NKI tensors
    prefix: str = "nisa"                 # how errors name the call (nisa.<name> / nl.<name>)
    handle: bool = True                  # an ISA instruction: return its NkiInstruction handle


def source(row: Row, names: Tuple[str, ...], enum_params: Dict[str, str]) -> str:
    """The Python source of one wrapper over parameters ``names`` (``enum_params``: parameter
    name -> the enum class's name in the module)."""
    fname = f"{row.prefix}.{row.name}"
    lines = [f"def {row.name}({row.params}, **kw):",
             "    if kw:",
             f"        _reject(kw, {fname!r})"]
    for n in names:
        if n in enum_params:
            lines.append(f"    {n} = _enum({n}, {enum_params[n]}, {n!r}, {row.name!r}, "
                         f"{default_name(row.name, n)})")
    for t in row.tensors:
        lines.append(f"    {t} = _need({t}, {t!r}, {row.name!r})")
    lines.append(f"    return _handle({row.call})" if row.handle else f"    return {row.call}")
    return "\n".join(lines) + "\n"


def default_name(call: str, param: str) -> str:
    """The namespace name holding a parameter's default (one global lookup per call)."""
    return f"_default_{call}_{param}"


def build(rows: Iterable[Row], namespace: dict, enum_params: Dict[str, str]) -> None:
    """Define every row's wrapper in ``namespace`` (a module's globals: the names its calls and
    defaults use, plus ``_reject``, ``_enum``, ``_need``, ``_handle``)."""
    filename = namespace.get("__file__", os.path.abspath(__file__))
    for row in rows:
        probe: dict = {}
        exec(compile(f"def _probe({row.params}): pass", filename, "exec"), namespace, probe)
        params = inspect.signature(probe["_probe"]).parameters
        for k, p in params.items():
            if p.default is not inspect.Parameter.empty:
                namespace[default_name(row.name, k)] = p.default
        exec(compile(source(row, tuple(params), enum_params), filename, "exec"), namespace)
        made = namespace[row.name]
        made.__doc__ = row.doc
        made.__module__ = namespace.get("__name__", made.__module__)
        made.__qualname__ = row.name
