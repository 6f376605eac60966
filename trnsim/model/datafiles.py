"""The estimator's own data files (``data/*.toml``): figures with sources, overridable by dotted key; read
through the one data-file reader (``hardware.figures``)."""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from ..hardware.figures import lookup, read_package_toml, source_of

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _path(name: str) -> str:
    return os.path.join(DATA_DIR, name + ".toml")


def load(name: str) -> dict:
    """A data file by stem ("estimator", "calibration") as a raw dict (parsed once)."""
    return read_package_toml(_path(name))


def reload() -> None:
    """Forget the parsed files (after one was rewritten)."""
    read_package_toml.cache_clear()


def figure(name: str, key: str, overrides: Optional[Mapping[str, Any]] = None) -> Any:
    """The value of ``section.key`` in data file ``name``; ``overrides[section.key]`` wins."""
    return lookup(load(name), key, f"{name}.toml", overrides)


def source(name: str, key: str) -> str:
    """Where a figure comes from (its ``source`` field)."""
    return source_of(load(name), key)
