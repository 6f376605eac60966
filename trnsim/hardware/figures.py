"""The one reader of trnsim's data files (TOML): figures written ``{ value, source[, note][, unit]
[, confidence][, date] }``, read into plain values plus their provenance.

Every data file of the package goes through here: the hardware catalog (cores, chips with their power,
instances, GPUs and GPU systems, fabric), the model estimator's figures, the GPU efficiency factors, the
planner's search space, prices and power defaults.  ``confidence`` ("high" | "medium" | "low") marks figures
that are recalled or analyst estimates rather than vendor-published.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from ..errors import ConfigError, HardwareFileError

FIGURE_KEYS = frozenset({"value", "source", "note", "unit", "confidence", "date"})
CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True)
class Figure:
    """Where one number came from: source tag or text, note, confidence."""
    source: str
    note: str = ""
    confidence: str = "high"

    def describe(self) -> str:
        """One line: source, note and (when not high) the confidence."""
        s = self.source + (f" — {self.note}" if self.note else "")
        return s if self.confidence == "high" else f"{s} [confidence: {self.confidence}]"


def read_toml(path: str, rule: str = "hardware-file") -> dict:
    """Parse one TOML file; a missing, unreadable or malformed file is a HardwareFileError naming it."""
    what = "hardware file" if rule.startswith("hardware") else "data file"
    try:
        with open(path, "rb") as f:
            return _toml.load(f)
    except FileNotFoundError:
        raise HardwareFileError(f"{what} not found: {path}", rule=rule, value=path) from None
    except (_toml.TOMLDecodeError, UnicodeDecodeError, RecursionError) as e:   # binary, deeply nested
        raise HardwareFileError(f"{what} {path} is not valid TOML: {e}", rule=f"{rule}-syntax",
                                value=path) from None
    except OSError as e:  # a folder, no permission, a device that cannot be read
        raise HardwareFileError(f"{what} {path} cannot be read: {e.strerror or e}", rule=rule,
                                value=path) from None


@functools.lru_cache(maxsize=64)
def read_package_toml(path: str) -> dict:
    """A data file shipped with the package, parsed once (treat the result as read-only)."""
    return read_toml(path, "data-file")


def is_figure(v: Any) -> bool:
    """A figure is a table with a ``value`` (and its ``source``)."""
    return isinstance(v, Mapping) and "value" in v


def check_figure(v: Mapping, path: str, file: str, tags: Optional[Mapping[str, Any]] = None,
                 rule: str = "hardware-file") -> Figure:
    """Check one figure table (known keys, a source, a valid confidence) and return its provenance.

    With ``tags``, a source must be ``choice: ...``, ``derived: ...``, ``calibration: ...`` or a list of
    known tags separated by spaces."""
    extra = set(v) - FIGURE_KEYS
    if extra:
        raise HardwareFileError(f"{file}: figure {path} has unknown keys {sorted(extra)}", rule=f"{rule}-figure",
                                limit=sorted(FIGURE_KEYS), value=sorted(extra))
    src = str(v.get("source", "")).strip()
    if not src:
        raise HardwareFileError(f"{file}: figure {path} has no source", rule=f"{rule}-source", value=path,
                                hint='every figure needs source = "TAG" (see sources.toml) or "choice: why"')
    conf = str(v.get("confidence", "high"))
    if conf not in CONFIDENCE:
        raise HardwareFileError(f"{file}: figure {path} has confidence {conf!r}", rule=f"{rule}-figure",
                                limit=CONFIDENCE, value=conf)
    if tags is not None and src.split(":")[0] not in ("choice", "derived", "calibration"):
        for tag in src.split():
            if tag not in tags:
                raise HardwareFileError(f"{file}: figure {path} cites unknown source tag {tag!r}",
                                        rule=f"{rule}-source", limit=sorted(tags), value=tag)
    return Figure(source=src, note=str(v.get("note", "")), confidence=conf)


def unwrap_figures(table: Mapping, path: str, file: str, provenance: Dict[str, Figure],
                   tags: Optional[Mapping[str, Any]] = None, rule: str = "hardware-file") -> dict:
    """Replace every figure table in ``table`` by its value, recording ``path -> Figure``."""
    out = {}
    for k, v in table.items():
        p = f"{path}.{k}" if path else str(k)
        if is_figure(v):
            provenance[p] = check_figure(v, p, file, tags, rule)
            out[k] = v["value"]
        elif isinstance(v, Mapping):
            out[k] = unwrap_figures(v, p, file, provenance, tags, rule)
        else:
            out[k] = v
    return out


def lookup(raw: Mapping, key: str, file: str, overrides: Optional[Mapping[str, Any]] = None) -> Any:
    """The value at dotted ``key`` of a parsed data file (a figure's value, or a bare value);
    ``overrides[key]`` wins."""
    if overrides and key in overrides:
        return overrides[key]
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"no figure {key!r} in {file}", rule="data-file-figure", value=key)
        node = node[part]
    return node["value"] if is_figure(node) else node


def source_of(raw: Mapping, key: str) -> str:
    """Where the figure at dotted ``key`` comes from (its ``source``; 'n/s' when not stated)."""
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return "n/s"
        node = node[part]
    return str(node.get("source", "n/s")) if isinstance(node, Mapping) else "n/s"
