"""Figure tables in the GPU, efficiency, price and power data files: ``{ value, source[, note][, confidence] }``.

Unlike the Trainium catalog these files also carry a ``confidence`` ("high" | "medium" | "low") because
many GPU, price and power figures are recalled or analyst estimates rather than vendor-published.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from ...errors import HardwareFileError

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


def read_toml_file(path: str, rule: str = "data-file") -> dict:
    """Parse a TOML file; a missing file or a syntax error is a HardwareFileError naming the file."""
    try:
        with open(path, "rb") as f:
            return _toml.load(f)
    except FileNotFoundError:
        raise HardwareFileError(f"data file not found: {path}", rule=rule, value=path) from None
    except (_toml.TOMLDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise HardwareFileError(f"data file {path} is not valid TOML: {e}", rule=rule + "-syntax",
                                value=path) from None
    except OSError as e:  # a folder, no permission, a device that cannot be read
        raise HardwareFileError(f"cannot read data file {path}: {e.strerror or e}", rule=rule,
                                value=path) from None


def is_figure(v: Any) -> bool:
    """True for a ``{ value = ..., source = ... }`` table."""
    return isinstance(v, Mapping) and "value" in v


def figure(v: Mapping, path: str, file: str, tags: Optional[Mapping[str, Any]] = None) -> Figure:
    """Check one figure table (known keys, a source, a valid confidence) and return its provenance.

    With ``tags``, a source must be ``choice: ...``, ``derived: ...``, ``calibration: ...`` or a list
    of known tags separated by spaces.
    """
    extra = set(v) - FIGURE_KEYS
    if extra:
        raise HardwareFileError(f"{file}: figure {path} has unknown keys {sorted(extra)}",
                                rule="data-file-figure", limit=sorted(FIGURE_KEYS), value=sorted(extra))
    src = str(v.get("source", "")).strip()
    if not src:
        raise HardwareFileError(f"{file}: figure {path} has no source", rule="data-file-source",
                                value=path, hint='every figure needs source = "TAG" or "choice: why"')
    conf = str(v.get("confidence", "high"))
    if conf not in CONFIDENCE:
        raise HardwareFileError(f"{file}: figure {path} has confidence {conf!r}",
                                rule="data-file-figure", limit=CONFIDENCE, value=conf)
    if tags is not None and src.split(":")[0] not in ("choice", "derived", "calibration"):
        for tag in src.split():
            if tag not in tags:
                raise HardwareFileError(f"{file}: figure {path} cites unknown source tag {tag!r}",
                                        rule="data-file-source", limit=sorted(tags), value=tag)
    return Figure(source=src, note=str(v.get("note", "")), confidence=conf)


def unwrap_figures(table: Mapping, path: str, file: str, provenance: Dict[str, Figure],
                   tags: Optional[Mapping[str, Any]] = None) -> dict:
    """Replace every figure table in ``table`` by its value, recording ``path -> Figure``."""
    out = {}
    for k, v in table.items():
        p = f"{path}.{k}" if path else str(k)
        if is_figure(v):
            provenance[p] = figure(v, p, file, tags)
            out[k] = v["value"]
        elif isinstance(v, Mapping):
            out[k] = unwrap_figures(v, p, file, provenance, tags)
        else:
            out[k] = v
    return out
