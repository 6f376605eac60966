"""What a capture records per operator call: ``TensorSpec``, ``CapturedOp``, and the user's source line.

Plain frozen data with no torch objects in it, so a report can be pickled, compared and turned into JSON.
"""
from __future__ import annotations

import os
import re
import sysconfig
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from ...ir.dtypes import width


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one tensor argument or result (no data: captures run on the meta device)."""
    shape: Tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return dtype_itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor."""
        return self.numel * self.itemsize

    def to_dict(self) -> dict:
        """Plain JSON-able fields."""
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class Loc:
    """A place in the user's source: file, line, function."""
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def to_dict(self) -> dict:
        """Plain JSON-able fields."""
        return {"file": self.file, "line": self.line, "function": self.function}


@dataclass(frozen=True)
class CapturedOp:
    """One operator call in the captured graph, with what is needed to classify and cost it."""
    namespace: str                    # "aten", or a custom library ("mylib", "flash_attn", ...)
    name: str                         # operator name without namespace or overload, e.g. "linear"
    overload: str                     # "default", "Tensor", ...
    args: Tuple[Any, ...]             # TensorSpec for tensors, tuples of them for lists, plain values otherwise
    kwargs: Tuple[Tuple[str, Any], ...]
    outputs: Tuple[TensorSpec, ...]
    module: str = ""                  # dotted path of the nn.Module that issued it ("blocks.0.attn")
    loc: Optional[Loc] = None         # the user's source line, when the capture kept a stack trace
    lowers_to: Tuple[str, ...] = ()   # dispatcher-level aten ops it decomposes into (export capture only)
    arg_names: Tuple[str, ...] = ()   # the schema's argument names, to read positional args by name

    @property
    def qualname(self) -> str:
        """``namespace::name``, the spelling of the torch-neuronx list."""
        return f"{self.namespace}::{self.name}"

    def get(self, key: str, default: Any = None) -> Any:
        """An argument by its schema name, whether it was passed by keyword or by position."""
        for k, v in self.kwargs:
            if k == key:
                return v
        if key in self.arg_names:
            i = self.arg_names.index(key)
            if i < len(self.args):
                return self.args[i]
        return default

    def tensor_args(self) -> List[TensorSpec]:
        """Tensor arguments in order (lists of tensors flattened)."""
        out: List[TensorSpec] = []
        for a in list(self.args) + [v for _, v in self.kwargs]:
            if isinstance(a, TensorSpec):
                out.append(a)
            elif isinstance(a, tuple):
                out.extend(x for x in a if isinstance(x, TensorSpec))
        return out


# torch dtypes the trace's dtype table (ir/dtypes.py) does not list; every other name is read there,
# and an unknown name counts as 4 bytes (fp32), that table's default
_TORCH_ONLY_ITEMSIZE = {"complex64": 8, "complex128": 16, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}


def dtype_itemsize(dtype: str) -> int:
    """Bytes per element of a torch dtype name ("bfloat16" -> 2)."""
    got = _TORCH_ONLY_ITEMSIZE.get(dtype)
    return got if got is not None else width(dtype)


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (no torch import needed)."""
    return str(dtype).replace("torch.", "")


# ------------------------------------------------------------------------------ source locations
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TRNSIM_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _library_dirs() -> Tuple[str, ...]:
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(os.path.abspath(d) + os.sep for d in dirs))


_LIB_DIRS = _library_dirs()


def is_library_file(path: str) -> bool:
    """True for torch, the standard library, installed packages and trnsim itself (never blamed)."""
    p = os.path.abspath(path)
    return p.startswith(_TRNSIM_DIR) or p.startswith(_LIB_DIRS) or p.startswith("<")


def pick_user_frame(frames: Iterable[Tuple[str, int, str]], prefer: Sequence[str] = ()) -> Optional[Loc]:
    """The innermost frame in one of the ``prefer`` files, else the innermost non-library frame."""
    frames = list(frames)
    prefer_abs = {os.path.abspath(p) for p in prefer}
    for f, line, func in reversed(frames):
        if os.path.abspath(f) in prefer_abs:
            return Loc(f, line, func)
    for f, line, func in reversed(frames):
        if not is_library_file(f):
            return Loc(f, line, func)
    return None


def loc_from_stack_trace(text: str, prefer: Sequence[str] = ()) -> Optional[Loc]:
    """The user's line from an fx node's ``stack_trace`` string (outermost frame first)."""
    if not text:
        return None
    frames = [(m["file"], int(m["line"]), m["func"]) for m in _FRAME.finditer(text)]
    return pick_user_frame(frames, prefer)


def plain(value: Any) -> Any:
    """A non-tensor operator argument as a JSON-able value (dtypes, devices, layouts become strings)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    try:  # SymInt / SymFloat with a hint
        return int(value)
    except Exception:
        return str(value)
