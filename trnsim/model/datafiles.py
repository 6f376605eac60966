"""The estimator's own data files (``data/*.toml``): figures with sources, overridable by dotted key."""
from __future__ import annotations

import functools
import os
from typing import Any, Mapping, Optional

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from ..errors import ConfigError

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@functools.lru_cache(maxsize=8)
def load(name: str) -> dict:
    """A data file by stem ("estimator", "calibration") as a raw dict."""
    with open(os.path.join(DATA_DIR, name + ".toml"), "rb") as f:
        return _toml.load(f)


def figure(name: str, key: str, overrides: Optional[Mapping[str, Any]] = None) -> Any:
    """The value of ``section.key`` in data file ``name``; ``overrides[section.key]`` wins."""
    if overrides and key in overrides:
        return overrides[key]
    node: Any = load(name)
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"no figure {key!r} in {name}.toml", rule="model-data", value=key)
        node = node[part]
    return node["value"] if isinstance(node, Mapping) and "value" in node else node


def source(name: str, key: str) -> str:
    """Where a figure comes from (its ``source`` field)."""
    node: Any = load(name)
    for part in key.split("."):
        node = node[part]
    return node.get("source", "n/s") if isinstance(node, Mapping) else "n/s"
