"""The one check of the numbers and names a user gives, shared by the command line and the Python API.

``check_params(fn, **values)`` refuses a count that is not a whole number in range, a real that is NaN,
infinite or out of range, and a wrong type, with the same ``ConfigError`` whichever face was used (the
limits: ``trnsim/data/limits.toml``).  ``unknown_name`` builds the "did you mean" error for a name
chosen from a list.  This module imports nothing above ``errors`` so every layer may use it.
"""
from __future__ import annotations

import difflib
import math
import numbers
import os
from functools import lru_cache
from typing import Any, Dict, Iterable, Mapping, Optional

from .errors import ConfigError

LIMITS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "limits.toml")


@lru_cache(maxsize=4)
def _load(path: str) -> Dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the limits file {path} ({e})", rule="limits-file", value=path) from None


def limits() -> Dict[str, Any]:
    """The limits table (``$TRNSIM_LIMITS`` names a replacement file)."""
    return _load(os.environ.get("TRNSIM_LIMITS") or LIMITS_FILE)


def param_rule(name: str) -> Optional[Mapping[str, Any]]:
    """The limits entry of one parameter, or None when it has none."""
    return limits().get("params", {}).get(name)


def _where(name: str, rule: Mapping[str, Any], value: Any, where: Optional[str]) -> str:
    return where or f"{rule.get('option', name)} {value!r}".replace("'", "")


def check_value(name: str, value: Any, where: Optional[str] = None) -> Any:
    """``value`` checked against the limits of parameter ``name``: an int for counts and seeds, a float
    for numbers; None (not given) passes.  A bool, a non-integral count, NaN/inf and out-of-range values
    are ConfigErrors naming the parameter, the limit and the value; None passes only where the limits
    file marks the parameter ``optional``."""
    rule = param_rule(name)
    if rule is None or (value is None and rule.get("optional")):
        return value
    if isinstance(value, (list, tuple)) and value and rule.get("sequence"):
        return type(value)(check_value(name, v, where) for v in value)
    kind, opt = rule["kind"], rule.get("option", name)
    lo, hi = rule.get("min"), rule.get("max")
    label = f"{name.replace('_', ' ')} ({opt})"
    if kind == "text":
        return _check_type(name, label, rule, value, where)
    rng = _range_text(rule)

    def bad(msg: str, v: Any = value):
        return ConfigError(f"{label} {msg}", rule=rule.get("rule", "option-value"), limit=rng, value=_show(v),
                           where=_where(name, rule, value, where), hint=rule.get("hint"))

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        what = "a whole number" if kind in ("count", "seed") else "a number"
        raise bad(f"must be {what}, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise bad("must be finite")
    if kind in ("count", "seed"):
        if not isinstance(value, numbers.Integral):
            raise bad(f"must be a whole number (int), not {type(value).__name__}")
        v: Any = int(value)
    else:
        v = float(value)
    if lo is not None and (v < lo or (rule.get("min_exclusive") and v <= lo)):
        raise bad("is too small" if v >= 0 else "must not be negative")
    if hi is not None and v > hi:
        raise bad("is over its limit", v)
    return v


def _check_type(name: str, label: str, rule: Mapping[str, Any], value: Any, where: Optional[str]) -> Any:
    """A naming parameter's value is of one of the ``types`` its limits entry lists (by class name, so
    this bottom module imports nothing above it); the name itself is checked where it is used."""
    import collections.abc as abc
    import os as _os
    names = {c.__name__ for c in type(value).__mro__}
    if isinstance(value, abc.Mapping):
        names.add("Mapping")
    if hasattr(value, "hbm_bytes_per_core") and hasattr(value, "cores"):
        names.add("SystemModel")   # a protocol: any class with its figures (TrainiumSystem, GpuSystem)
    if isinstance(value, _os.PathLike):
        names.add("PathLike")
    types = list(rule.get("types", ["str"]))
    names |= {t for t in types if t.startswith("has:") and hasattr(value, t[4:])}   # duck-typed objects
    if names & set(types) and not isinstance(value, bool):
        return value
    shown = " or ".join(f"an object with .{t[4:]}" if t.startswith("has:") else t for t in types)
    raise ConfigError(f"{label} must be {shown}, not {type(value).__name__}", rule="option-type",
                      limit=shown, value=repr(value)[:80], where=where or rule.get("option", name))


def _show(v: Any) -> Any:
    """A value for an error's JSON: non-finite floats as text (strict JSON has no NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _range_text(rule: Mapping[str, Any]) -> str:
    lo, hi = rule.get("min"), rule.get("max")
    kind = rule["kind"]
    whole = "a whole number " if kind in ("count", "seed") else ""
    left = f"> {_num(lo)}" if rule.get("min_exclusive") else f">= {_num(lo)}"
    return f"{whole}{left} and <= {_num(hi)}" if hi is not None else f"{whole}{left}"


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def as_sequence(value: Any) -> Any:
    """A list of an iterable that is not text or a mapping (a generator, a set), else ``value`` as it is,
    so a type check can look at it without consuming it."""
    from collections.abc import Iterable as _It, Mapping as _Map
    if isinstance(value, (str, bytes, _Map, list, tuple)) or not isinstance(value, _It):
        return value
    return list(value)


def check_order(names: Iterable[str]) -> list:
    """``names`` in the order of the limits file, so that with several bad values the command line and
    the API report the same one first."""
    order = {n: i for i, n in enumerate(limits().get("params", {}))}
    return sorted(names, key=lambda n: order.get(n, len(order)))


def check_params(**values: Any) -> Dict[str, Any]:
    """Every keyword that has a limits entry checked (``check_value``, in the limits file's order);
    returns the checked values."""
    return {k: check_value(k, values[k]) for k in check_order(values)}


def check_sweep_length(points: int, where: str) -> int:
    """A sweep's number of points against ``[sweep] max_points``."""
    cap = int(limits().get("sweep", {}).get("max_points", 100_000))
    if points > cap:
        raise ConfigError(f"the sweep has {points:,} points", rule="sweep-length", limit=f"<= {cap:,} points",
                          value=points, where=where, hint="use a larger step ratio or a narrower range")
    return points


def finite(value: Any, what: str, where: Optional[str] = None, *, low: Optional[float] = None,
           high: Optional[float] = None, strict_low: bool = False) -> float:
    """A real number that is finite and within [low, high] (``strict_low``: > low), else a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{what} must be a number", rule="option-value", value=str(value),
                              where=where) from None
    v = float(value)
    lim = " and ".join(x for x in ((f"{'>' if strict_low else '>='} {low:g}" if low is not None else ""),
                                    (f"<= {high:g}" if high is not None else "")) if x) or "finite"
    if not math.isfinite(v) or (low is not None and (v < low or (strict_low and v <= low))) \
            or (high is not None and v > high):
        raise ConfigError(f"{what} must be finite" + ("" if lim == "finite" else f" and {lim}"),
                          rule="option-value", limit=lim, value=_show(v), where=where)
    return v


# ----------------------------------------------------------------------- sizes and counts
# The one grammar of sizes and counts users type (documented in README, "Sizes and counts"):
#   sizes (bytes):  a number, then B, or an IEC prefix KiB MiB GiB TiB (powers of 2), or an SI prefix
#                   KB MB GB TB (powers of 10); a bare K M G T means KiB MiB GiB TiB, as nccom-test reads
#                   it.  A lower-case b means bits (Gb, Mb, kb, b): refused, never read as bytes.
#   counts (tokens, requests): a number, then nothing or an SI prefix K M G T (powers of 10): 1T = 10^12.
COUNT_PREFIXES = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
BITS_HINT = "a lower-case b means bits; write B for bytes, e.g. 1GB (10^9 bytes) or 1GiB (2^30 bytes)"


def is_bits_unit(unit: str) -> bool:
    """True for a unit written in bits (``Gb``, ``Mib``, ``kb``, ``b``): the last letter a lower-case b."""
    return bool(unit) and unit.endswith("b")


def parse_count(text: Any, what: str = "count", where: Optional[str] = None) -> float:
    """``"1T"`` -> 1e12, ``"15T"``, ``"2.5M"``, ``"1e12"``, ``4096``: a positive finite count with an
    optional SI prefix (K M G T, powers of 10); anything else is a ConfigError naming the grammar."""
    import re
    if isinstance(text, bool):
        raise ConfigError(f"{what} must be a number", rule="count-grammar", value=str(text), where=where)
    if isinstance(text, numbers.Real):
        v = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]?)\s*", str(text))
        if not m or m.group(2).lower() not in COUNT_PREFIXES:
            raise ConfigError(f"cannot read {what} {text!r}", rule="count-grammar",
                              limit="a number with an optional K, M, G or T (powers of 10)", value=str(text),
                              where=where, hint="e.g. 1T (10^12), 250G, 4M, 1e12")
        v = float(m.group(1)) * COUNT_PREFIXES[m.group(2).lower()]
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{what} must be a positive finite number", rule="count-grammar", limit="> 0",
                          value=_show(v), where=where)
    return v


def count_arg(text: str) -> float:
    """argparse ``type=`` for a count option (``--tokens 1T``): the grammar of ``parse_count``."""
    import argparse
    try:
        return parse_count(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(f"{e.message} ({e.limit or ''}; e.g. 1T, 250G, 4M, 1e12)") from None


def suggest(name: str, choices: Iterable[str], n: int = 3) -> list:
    """The nearest names of ``choices`` to ``name`` (case-insensitive), best first."""
    pool = [str(c) for c in choices]
    low = {c.lower(): c for c in pool}
    got = difflib.get_close_matches(str(name).lower(), list(low), n=n, cutoff=0.6)
    return [low[g] for g in got]


def did_you_mean(name: str, choices: Iterable[str]) -> Optional[str]:
    """``"did you mean a, b?"`` for the nearest names, or None when nothing is near."""
    near = suggest(name, choices)
    return f"did you mean {', '.join(near)}?" if near else None


def unknown_name(kind: str, name: str, choices: Iterable[str], *, rule: str, where: Optional[str] = None,
                 error=ConfigError):
    """The error for a name not in a list: what it is, the list (first 20), and "did you mean"."""
    pool = sorted(str(c) for c in choices)
    shown = ", ".join(pool[:20]) + (f", ... ({len(pool)} in all)" if len(pool) > 20 else "")
    return error(f"unknown {kind} {name!r}", rule=rule, limit=shown, value=name, where=where,
                 hint=did_you_mean(name, pool))
