"""Framework-compiled ops against trnsim's hand-written reference kernels (``data/codegen.toml``).

The reference kernels are hand-written NKI; an op a framework hands to the Neuron compiler runs the
compiler's code, measured slower on the same shape.  ``codegen_scale`` is the time multiplier.
"""
from __future__ import annotations

import os
from functools import lru_cache

from ...errors import ConfigError
from ...hardware.figures import is_figure, read_toml

CODEGEN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "codegen.toml")
CODEGENS = ("nki", "framework")


@lru_cache(maxsize=None)
def _table(path: str) -> dict:
    return read_toml(path)


def codegen_scale(kernel: str, target: str, codegen: str, path: str = CODEGEN_FILE) -> float:
    """Time of ``kernel`` on ``target`` written by ``codegen`` over the reference kernel's time:
    1.0 for ``nki`` and for kernels or generations the data file has no entry for."""
    if codegen not in CODEGENS:
        raise ConfigError(f"unknown code generator {codegen!r}", rule="codegen", limit=CODEGENS,
                          value=codegen, hint="nki = hand-written NKI kernel, framework = the Neuron "
                          "compiler's code for a framework op (torch-neuronx eager, torch-xla)")
    if codegen == "nki":
        return 1.0
    entry = _table(path).get(kernel, {}).get(target, {}).get("compiled_over_nki")
    if entry is None:
        return 1.0
    value = float(entry["value"] if is_figure(entry) else entry)
    if value <= 0:
        raise ConfigError("compiled_over_nki must be positive", rule="codegen-range", limit="> 0",
                          value=value)
    return value
