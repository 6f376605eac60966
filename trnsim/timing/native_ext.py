"""Loading the C extension of dependency analysis and list scheduling (``_native.c``), and choosing
it: the leaf the encoder and the native entry points (native.py) share.

``TRNSIM_NATIVE=0`` forces the Python path (checked on every call, so tests can flip it).
"""
from __future__ import annotations

import os

try:
    from . import _native as _mod
except ImportError:  # not built (no compiler at install time)
    _mod = None


class NotTuples(TypeError):
    """The trace's records are not NamedTuples; the C encoder cannot read them."""


if _mod is not None:
    _mod.set_not_tuples(NotTuples)


def module():
    """The extension module, or None when it is not built or TRNSIM_NATIVE=0."""
    if _mod is None or os.environ.get("TRNSIM_NATIVE", "").strip().lower() in ("0", "false", "off",
                                                                               "no"):
        return None
    return _mod


def available() -> bool:
    """True when the C extension is built and not switched off."""
    return module() is not None


def resolve(backend: str) -> bool:
    """True when ``backend`` ('auto' | 'native' | 'python') selects the native code."""
    if backend == "python":
        return False
    if backend == "auto":
        return available()
    if backend == "native":
        if not available():
            raise RuntimeError("trnsim.timing._native is not available (not built, or "
                               "TRNSIM_NATIVE=0); use backend='python'")
        return True
    raise ValueError(f"unknown backend {backend!r}: expected 'auto', 'native' or 'python'")
