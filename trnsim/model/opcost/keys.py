"""Cache keys: what a simulated time depends on (hardware figures, timing-model code, kernel, shape,
dtype, target), hashed."""
from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
from typing import Mapping, Optional

from ...errors import HardwareFileError


def _digest_files(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(os.path.basename(p).encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _builtin_hardware_digest() -> str:
    from ...hardware.loader import DATA_DIR
    return _digest_files(sorted(glob.glob(os.path.join(DATA_DIR, "*.toml"))))


def hardware_hash(hardware_file: Optional[str] = None) -> str:
    """sha256 of the built-in hardware data files plus the content of a user's hardware file."""
    h = hashlib.sha256(_builtin_hardware_digest().encode())
    if hardware_file:
        try:
            with open(hardware_file, "rb") as f:
                h.update(f.read())
        except OSError as e:
            raise HardwareFileError(f"cannot read hardware file {hardware_file}: {e.strerror}",
                                    rule="hardware-file", value=hardware_file) from None
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def timing_model_digest() -> str:
    """sha256 of the timing model's source (trnsim/timing): a changed cost rule invalidates the cache."""
    from ... import timing
    d = os.path.dirname(os.path.abspath(timing.__file__))
    return _digest_files(sorted(glob.glob(os.path.join(d, "*.py")) + glob.glob(os.path.join(d, "*.c"))))


def scope_key(hw_hash: str, target: str) -> str:
    """The part of every key shared by one SimulatedOpCosts: hardware, timing model, target."""
    return hashlib.sha256(f"{hw_hash}|{timing_model_digest()}|{target}".encode()).hexdigest()[:32]


def shape_text(shape: Mapping[str, int]) -> str:
    """A canonical text of a shape dict (sorted keys, ints)."""
    return json.dumps({k: int(v) for k, v in sorted(shape.items())}, separators=(",", ":"))


def row_key(scope: str, kernel: str, version: int, shape: Mapping[str, int], dtype: str) -> str:
    """The primary key of one simulated time."""
    text = f"{scope}|{kernel}|{int(version)}|{shape_text(shape)}|{dtype}"
    return hashlib.sha256(text.encode()).hexdigest()
