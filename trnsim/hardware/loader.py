"""Read hardware data files (TOML, through ``figures``) into plain values plus a parallel map of sources.

A figure is written either as a bare value (only for names and lists of names) or as a table
``{ value = ..., source = "TAG", note = "..." }``.  ``source`` is a tag from ``sources.toml`` (which
names the public document), ``derived: <how>``, ``choice: <why>`` where the docs are silent or
disagree, or ``calibration: <row ids>`` for constants fitted to ``shared/calibration``.
A user file given with ``--hardware`` / ``TRNSIM_HARDWARE`` is deep-merged over the built-in data,
so it can change one figure or add a whole new core, chip or instance.
"""
from __future__ import annotations

import copy
import math
import os
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Dict, Mapping, Tuple, get_args, get_origin, get_type_hints

from ..errors import HardwareFileError
from .figures import Figure, is_figure, read_toml, unwrap_figures
from .rules import check_range

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

Sources = Dict[str, str]


def deep_merge(base: dict, over: Mapping) -> dict:
    """Merge ``over`` into a copy of ``base``; a figure table replaces a figure as a whole."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and "value" not in v and isinstance(out.get(k), dict) \
                and "value" not in out[k]:
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def unwrap(table: Mapping, path: str, sources: Sources, file: str) -> dict:
    """Replace every figure table by its value, recording ``path -> source`` (with its note) in ``sources``."""
    prov: Dict[str, Figure] = {}
    out = unwrap_figures(table, path, file, prov)
    sources.update({p: f.describe() for p, f in prov.items()})
    return out


def _check_type(value: Any, tp: Any, path: str, file: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise HardwareFileError(f"{file}: {path} must be a list", rule="hardware-file-type",
                                    limit="list", value=type(value).__name__)
        args = get_args(tp)
        elem = args[0] if args else Any
        return tuple(_check_type(x, elem, f"{path}[{i}]", file) for i, x in enumerate(value))
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise HardwareFileError(f"{file}: {path} must be a number", rule="hardware-file-type",
                                    limit="number", value=repr(value))
        if not math.isfinite(value):
            raise HardwareFileError(f"{file}: {path} must be a finite number", rule="hardware-file-range",
                                    limit="finite", value=repr(value))
        if value < 0:
            raise HardwareFileError(f"{file}: {path} must not be negative", rule="hardware-file-range",
                                    limit=">= 0", value=value)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise HardwareFileError(f"{file}: {path} must be an integer",
                                        rule="hardware-file-type", limit="integer", value=repr(value))
        if value < 0:
            raise HardwareFileError(f"{file}: {path} must not be negative", rule="hardware-file-range",
                                    limit=">= 0", value=value)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise HardwareFileError(f"{file}: {path} must be true or false", rule="hardware-file-type",
                                    limit="bool", value=repr(value))
        return value
    if tp is str:
        if not isinstance(value, str):
            raise HardwareFileError(f"{file}: {path} must be a string", rule="hardware-file-type",
                                    limit="string", value=repr(value))
        return value
    if is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise HardwareFileError(f"{file}: {path} must be a table", rule="hardware-file-type",
                                    limit="table", value=type(value).__name__)
        return build(tp, value, path, file)
    return value


def build(cls, values: Mapping, path: str, file: str, **extra):
    """Construct frozen dataclass ``cls`` from ``values``, checking required keys and types."""
    hints = get_type_hints(cls)
    kwargs = dict(extra)
    known = set()
    for f in fields(cls):
        known.add(f.name)
        if f.name in kwargs:
            continue
        p = f"{path}.{f.name}" if path else f.name
        if f.name in values:
            tp = hints[f.name]
            if get_origin(tp) is not None and type(None) in get_args(tp):  # Optional[X]
                inner = [a for a in get_args(tp) if a is not type(None)][0]
                v = values[f.name]
                kwargs[f.name] = None if v is None else _check_type(v, inner, p, file)
            else:
                kwargs[f.name] = _check_type(values[f.name], tp, p, file)
            check_range(cls.__name__, f.name, kwargs[f.name], p, file)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise HardwareFileError(f"{file}: missing {p}", rule="hardware-file-missing",
                                    hint=f"{cls.__name__} needs '{f.name}'")
    unknown = set(values) - known
    if unknown:
        raise HardwareFileError(f"{file}: {path or 'top level'} has unknown keys {sorted(unknown)}",
                                rule="hardware-file-unknown-key",
                                limit=sorted(known), value=sorted(unknown))
    return cls(**kwargs)


def load_merged(names: Tuple[str, ...], user_file: str | None) -> Tuple[dict, dict]:
    """Built-in files ``names`` merged (each under its stem), then ``user_file`` over them.

    Returns ``(raw, origin)`` where origin maps the top-level section to the file it came from.
    """
    raw: dict = {}
    origin: dict = {}
    for n in names:
        p = os.path.join(DATA_DIR, n)
        stem = os.path.splitext(n)[0]
        raw[stem] = read_toml(p)
        origin[stem] = p
    if user_file:
        user = read_toml(user_file)
        unknown = set(user) - set(raw)
        if unknown:
            raise HardwareFileError(f"{user_file}: unknown top-level sections {sorted(unknown)}",
                                    rule="hardware-file-unknown-key", limit=sorted(raw),
                                    value=sorted(unknown))
        raw = deep_merge(raw, user)
        for k in user:
            origin[k] = f"{origin[k]} + {user_file}"
    return raw, origin


# keys a derived table never takes from its base: the names that select a generation must be
# unique, so a what-if core states its own
NOT_INHERITED = frozenset(["targets", "dmi_product_name"])


def resolve_bases(section: Mapping, file: str) -> dict:
    """Expand ``base = "KEY"`` in each table of ``section``: the base's raw table (itself
    resolved first) with the table's own keys merged over it; inherited figures say so in their note."""
    out: dict = {}

    def resolve(key: str, chain: Tuple[str, ...]) -> dict:
        if key in out:
            return out[key]
        table = section[key]
        if not isinstance(table, Mapping) or "base" not in table:
            out[key] = table
            return table
        base = table["base"]
        if not isinstance(base, str) or base not in section:
            raise HardwareFileError(f"{file}: {key}.base names unknown entry {base!r}",
                                    rule="hardware-file-reference", limit=sorted(section), value=base)
        if base in chain:
            raise HardwareFileError(f"{file}: {key}.base forms a cycle {' -> '.join(chain + (base,))}",
                                    rule="hardware-file-reference", value=base)
        parent = {k: v for k, v in resolve(base, chain + (key,)).items() if k not in NOT_INHERITED}
        own = {k: v for k, v in table.items() if k != "base"}
        out[key] = deep_merge(_mark_inherited(parent, base), own)
        return out[key]

    for k in section:
        resolve(k, (k,))
    return out


def _mark_inherited(table: Mapping, base: str) -> dict:
    """A copy of ``table`` whose figures carry 'inherited from BASE' in their note."""
    out = {}
    for k, v in table.items():
        if is_figure(v):
            v = dict(v)
            note = f"inherited from {base}"
            v["note"] = f"{v['note']}; {note}" if v.get("note") else note
        elif isinstance(v, Mapping):
            v = _mark_inherited(v, base)
        out[k] = v
    return out


__all__ = ["DATA_DIR", "build", "deep_merge", "is_figure", "load_merged", "read_toml", "resolve_bases", "unwrap"]
