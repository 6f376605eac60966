"""One validation layer for what users type and the files they name: kernel arguments
(``NAME=SHAPE:DTYPE``), dtype spellings, launch grids, input files, output paths and input sizes.

Every check raises a ``ConfigError`` (or a ``CapacityError``) naming the rule, the value and the
argument it came from, before any simulation starts; the CLI and ``trnsim.api`` both call these.
"""
from __future__ import annotations

import ast
import os
import zipfile
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .errors import CapacityError, ConfigError

# The one documented set of dtype spellings: the NKI name first, then the numpy / short names.
# Numpy type codes ('f2', 'f8', 'i4'...) are refused: 'f8' is float64 to numpy but reads as fp8.
DTYPE_SPELLINGS: Dict[str, Tuple[str, ...]] = {
    "bfloat16": ("bf16",),
    "float16": ("fp16", "f16", "half"),
    "float32": ("fp32", "f32", "float"),
    "tfloat32": ("tf32",),
    "float8_e4m3": ("fp8_e4m3", "fp8"),
    "float8_e5m2": ("fp8_e5m2",),
    "float8_e3m4": ("fp8_e3m4",),
    "float8_e4m3fn": ("fp8_e4m3fn",),
    "int8": ("i8",), "int16": ("i16",), "int32": ("i32",),
    "uint8": ("u8",), "uint16": ("u16",), "uint32": ("u32",),
    "bool": ("bool_",),
}
_ALIAS = {a: canon for canon, aliases in DTYPE_SPELLINGS.items() for a in (canon,) + aliases}
SHAPE_HELP = ("NAME=SHAPE[:DTYPE] for a random array, e.g. a=4096x8192:bf16 (dims > 0 joined by 'x'; "
              "DTYPE one of " + ", ".join(f"{c} ({'/'.join(a)})" for c, a in DTYPE_SPELLINGS.items())
              + "; default float32), or NAME=VALUE for a Python literal (quote strings: mode=\"'max'\")")


def dtype_names() -> str:
    """Every accepted dtype spelling, for help texts and error limits."""
    return ", ".join(sorted(_ALIAS))


def parse_dtype(text: str, where: str = "") -> np.dtype:
    """The numpy dtype of one documented spelling (``bf16``, ``float32``, ``i32``...); others refused by name."""
    from .nki.core import dtypes as dt
    key = str(text).strip().lower()
    if key not in _ALIAS:
        raise ConfigError(f"unknown dtype {text!r}" + (f" in {where}" if where else ""),
                          rule="arg-dtype", limit=dtype_names(), value=text, where=where or None,
                          hint="numpy type codes such as f2/f8/i4 are not accepted: write float16, "
                          "float8_e4m3 or int32")
    return dt.as_dtype(_ALIAS[key])


def parse_shape_dtype(spec: str, where: str = "") -> Tuple[Tuple[int, ...], np.dtype]:
    """``"4096x8192:bf16"`` -> ``((4096, 8192), bfloat16)``; the dtype defaults to float32."""
    where = where or spec
    shape_s, dtype_s = spec.split(":", 1) if ":" in spec else (spec, "float32")
    parts = shape_s.strip().lower().replace("*", "x").split("x")
    dims = []
    for p in parts:
        p = p.strip()
        try:
            d = int(p)
        except ValueError:
            raise ConfigError(f"shape dimension {p!r} is not an integer in {where!r}", rule="arg-shape",
                              limit="dims > 0 joined by 'x', e.g. 4096x8192:bf16", value=p,
                              where=where) from None
        if d <= 0:
            raise ConfigError(f"shape dimension {d} must be positive in {where!r}", rule="arg-shape",
                              limit="> 0", value=d, where=where)
        dims.append(d)
    return tuple(dims), parse_dtype(dtype_s, where)


def _looks_like_shape(spec: str) -> bool:
    """Shape-like: a dim list (digits, signs, 'x') possibly with a ':dtype'; literals have no 'x'/':'."""
    head = spec.split(":", 1)[0].strip().lower()
    if ":" in spec and not spec.strip().startswith(("{", "[", "(", "'", '"')):
        return True
    return "x" in head and any(c.isdigit() for c in head) and all(c.isalnum() or c in "x*-+ ." for c in head)


def parse_arg(text: str) -> Tuple[str, Any]:
    """One ``--arg``: ``NAME=SHAPE:DTYPE`` -> (name, (shape, dtype)) or ``NAME=VALUE`` -> (name, literal)."""
    where = f"--arg {text}"
    if "=" not in text:
        raise ConfigError(f"--arg takes NAME=SHAPE:DTYPE or NAME=VALUE, got {text!r}", rule="arg",
                          limit="NAME=SHAPE:DTYPE or NAME=VALUE", value=text, where=where)
    name, spec = text.split("=", 1)
    name = name.strip()
    if not name.isidentifier():
        raise ConfigError(f"argument name {name!r} is not a Python identifier", rule="arg-name",
                          value=name, where=where)
    if _looks_like_shape(spec):
        return name, parse_shape_dtype(spec, where)
    try:
        return name, ast.literal_eval(spec)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ConfigError(f"value of {name} is neither a shape nor a Python literal: {spec!r}",
                          rule="arg-value", limit="a shape like 128x512:bf16 or a Python literal",
                          value=spec, where=where,
                          hint=f"for a string, quote it: --arg {name}=\"'{spec}'\"") from None


def parse_grid(text: str, where: str = "--grid") -> Tuple[int, ...]:
    """``"2,4"`` -> (2, 4): a legacy SPMD launch grid of positive integers."""
    dims = []
    for p in str(text).split(","):
        try:
            d = int(p.strip())
        except ValueError:
            raise ConfigError(f"--grid takes positive integers separated by commas, got {text!r}",
                              rule="launch-grid", limit="e.g. 2,4", value=text,
                              where=f"{where} {text}") from None
        if d <= 0:
            raise ConfigError(f"launch grid dimension {d} must be positive", rule="launch-grid",
                              limit="> 0", value=text, where=f"{where} {text}")
        dims.append(d)
    return tuple(dims)


def check_output_path(path: str, option: str, directory: bool = False) -> str:
    """An output file (or, with ``directory``, folder) can be written: its parent folder exists
    and is writable, and a file path is not a folder.  Checked before any simulation runs."""
    where = f"{option} {path}"
    p = os.path.abspath(os.path.expanduser(str(path)))
    parent = os.path.dirname(p)
    if not directory and os.path.isdir(p):
        raise ConfigError(f"{option} names a folder, not a file: {path}", rule="output-path",
                          value=path, where=where)
    if directory and os.path.exists(p) and not os.path.isdir(p):
        raise ConfigError(f"{option} names a file, not a folder: {path}", rule="output-path",
                          value=path, where=where)
    if not os.path.isdir(parent):
        raise ConfigError(f"the folder of {option} does not exist: {parent}", rule="output-path",
                          value=path, where=where, hint=f"create it first: mkdir -p {parent}")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"the folder of {option} is not writable: {parent}", rule="output-path",
                          value=path, where=where)
    if not directory:
        from .outputs import check_target
        check_target(path, option)  # an existing device, FIFO or socket is never written over
    return p


def load_npz(path: str, option: str = "--inputs") -> Dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name; a missing, unreadable or non-npz file is a ConfigError."""
    where = f"{option} {path}"
    if not os.path.exists(path):
        raise ConfigError(f"inputs file not found: {path}", rule="inputs-file", value=path, where=where)
    if os.path.isdir(path):
        raise ConfigError(f"inputs file is a folder: {path}", rule="inputs-file", value=path, where=where)
    try:
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with f:
            return {name: f[name] for name in f.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise ConfigError(f"{path} is not a readable .npz archive of arrays ({e})", rule="inputs-file",
                          value=path, where=where, hint="write it with numpy.savez(path, a=..., b=...)") from None


def check_input_size(name: str, shape: Tuple[int, ...], dtype: np.dtype, *, hbm_bytes: Optional[int],
                     host_bytes: Optional[int], where: str) -> int:
    """Bytes of one input, refused when over the simulated chip's HBM or (numerics on) the host's memory."""
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    for what, lim in (("HBM of the simulated chip", hbm_bytes), ("memory of this machine", host_bytes)):
        if lim is not None and nbytes > lim:
            raise CapacityError(f"input {name} ({'x'.join(map(str, shape))} {dtype}) needs {nbytes:,} bytes, "
                                f"more than the {what}", rule="input-capacity", limit=f"{lim:,} bytes",
                                value=f"{nbytes:,} bytes", where=where)
    return nbytes


def host_memory_bytes() -> Optional[int]:
    """Physical memory of this machine (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def available_memory_bytes() -> Optional[int]:
    """Memory this machine can still hand out (Linux ``MemAvailable``), else its physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return host_memory_bytes()


def check_host_memory(need: int, what: str, where: str, avail: Optional[int] = None,
                      hint: str = "use a smaller size") -> int:
    """Refuse work that needs more memory than this machine has free, naming the bytes it would need."""
    avail = available_memory_bytes() if avail is None else avail
    if avail is not None and need > avail:
        raise CapacityError(f"{what} needs about {need:,} bytes of host memory, more than the "
                            f"{avail:,} bytes free on this machine", rule="host-memory",
                            limit=f"{avail:,} bytes free", value=f"{need:,} bytes", where=where,
                            hint=hint)
    return need


def positive_int(text: Any, option: str) -> int:
    """An option that must be a positive integer (``--lnc``, ``--seed`` bounds aside)."""
    try:
        v = int(text)
    except (TypeError, ValueError):
        raise ConfigError(f"{option} takes a positive integer, got {text!r}", rule="option-value",
                          limit="> 0", value=text, where=f"{option} {text}") from None
    if v <= 0:
        raise ConfigError(f"{option} must be positive", rule="option-value", limit="> 0", value=v,
                          where=f"{option} {text}")
    return v



# command-line destinations whose API parameter has another name
_CLI_ALIASES = {"input": "input_len", "output": "output_len"}


def check_args(args: Any) -> None:
    """Every numeric option of a parsed command line checked against the limits the Python API uses
    (``trnsim.checks``), so both faces refuse the same values with the same error.  Text options
    are left to their own parsers."""
    import numbers

    from .checks import check_order, check_value, param_rule
    dests = {_CLI_ALIASES.get(d, d): d for d, v in vars(args).items()
             if not isinstance(v, bool) and isinstance(v, numbers.Real)}
    for name in check_order(dests):
        dest = dests[name]
        value = getattr(args, dest)
        rule = param_rule(name)
        if rule is not None:
            setattr(args, dest, check_value(name, value, where=f"{rule.get('option', dest)} {value}"))
