"""Find the user's source line: the innermost stack frame that is not trnsim's own code.

Like SimPy's ``_describe_frame`` and Triton's line-number rewriting, errors and trace records name
the kernel's own file and line, never a frame inside trnsim.
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import NamedTuple, Optional

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_internal_cache: dict = {}


class SourceLoc(NamedTuple):
    """A place in the user's code: file, line and function name."""
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"


_UNKNOWN = SourceLoc("<unknown>", 0, "?")
_loc_cache: dict = {}


def is_internal(code: types.CodeType) -> bool:
    """True when the code object belongs to trnsim itself (its frames are never blamed)."""
    # keyed by file name: code objects compare equal across files when their bodies match
    fn = code.co_filename
    r = _internal_cache.get(fn)
    if r is None:
        # trnsim's own files, and the launchers above the user's code (runpy, the `trnsim` entry
        # script), which must never be blamed for an error either
        r = (fn.startswith(_PKG_DIR) and "_shims" not in fn) or fn.startswith("<frozen") \
            or os.path.basename(fn) == "trnsim"
        _internal_cache[fn] = r
    return r


def user_frame(depth: int = 1) -> Optional[types.FrameType]:
    """The innermost stack frame outside trnsim (None when there is none)."""
    f = sys._getframe(depth)
    while f is not None and is_internal(f.f_code):
        f = f.f_back
    return f


def user_loc(depth: int = 2) -> SourceLoc:
    """The (file, line, function) of the innermost user frame; interned so traces share objects."""
    f = sys._getframe(depth)
    cache = _internal_cache
    while f is not None:
        r = cache.get(f.f_code.co_filename)  # is_internal, inlined: this runs on every op
        if r is None:
            r = is_internal(f.f_code)
        if not r:
            break
        f = f.f_back
    return frame_loc(f)


user_loc_py = user_loc  # the reference of the C walk below (tests compare the two)
try:
    from . import _source as _c
except ImportError:  # not built (no compiler at install time)
    _c = None
if _c is not None and os.environ.get("TRNSIM_NATIVE", "").strip().lower() not in (
        "0", "false", "off", "no"):
    # every traced instruction asks for its line: the walk in C, with this module's caches
    _c.setup(_internal_cache, is_internal, _loc_cache, SourceLoc, _UNKNOWN)
    user_loc = _c.user_loc  # noqa: F811


def frame_loc(f: Optional[types.FrameType]) -> SourceLoc:
    """The (file, line, function) frame ``f`` is at (unknown for None); interned."""
    if f is None:
        return _UNKNOWN
    key = (f.f_code.co_filename, f.f_code, f.f_lineno)  # equal code objects may live in two files
    loc = _loc_cache.get(key)
    if loc is None:
        loc = SourceLoc(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        _loc_cache[key] = loc
    return loc


def describe(loc: SourceLoc) -> str:
    """``file:line (function): source text`` for an error message."""
    if loc is _UNKNOWN:
        return "<unknown location>"
    text = ""
    try:
        import linecache
        text = linecache.getline(loc.file, loc.line).strip()
    except Exception:  # pragma: no cover - source not available
        text = ""
    s = f"{loc.file}:{loc.line} in {loc.function}"
    if text:
        s += f"\n    {text}"
    return s


def strip_internal_frames(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """Rebuild a traceback keeping only frames outside trnsim, so users see their own code only."""
    frames = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code):
            frames.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    new = None
    for frame, lasti, lineno in reversed(frames):
        new = types.TracebackType(new, frame, lasti, lineno)
    return new


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple:
    """Folders of the standard library and of installed packages."""
    import sysconfig
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")
                  if paths.get(k)})


def _is_library(filename: str) -> bool:
    """The standard library or an installed package (numpy, ml_dtypes...): never the user's own code."""
    if filename.startswith("<") or not (os.path.isabs(filename) or os.path.exists(filename)):
        return True  # a compiled extension's frame ("numpy/random/_generator.pyx"), no file of the user's
    return os.path.realpath(filename).startswith(_library_roots())


def user_exception(exc: BaseException, rule: str = "kernel-exception"):
    """A ``UserCodeError`` for an exception raised in (or through) the user's own code, with the
    user's frames only; None when no user frame took part (a fault of trnsim itself)."""
    import traceback
    from .errors import UserCodeError
    tb = exc.__traceback__
    frames, last_own = [], None  # user frames; the innermost frame of user or trnsim code
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_internal(code):
            last_own = "trnsim"
        elif not _is_library(code.co_filename):
            frames.append(tb)
            last_own = "user"
        tb = tb.tb_next
    # raised in trnsim (or in a library trnsim called): trnsim's fault, whoever called it
    if not frames or last_own != "user":
        return None
    last = frames[-1]
    loc = SourceLoc(last.tb_frame.f_code.co_filename, last.tb_lineno, last.tb_frame.f_code.co_name)
    summary = traceback.StackSummary.extract(
        ((t.tb_frame, t.tb_lineno) for t in frames), capture_locals=False)
    text = "Traceback (your code only):\n" + "".join(summary.format()) + \
        "".join(traceback.format_exception_only(type(exc), exc))
    return UserCodeError(f"{type(exc).__name__}: {exc}", rule=rule, where=describe(loc),
                         user_traceback=text, hint=_attribute_hint(exc))


def _attribute_hint(exc: BaseException):
    """"did you mean nl.load?" for a misspelt attribute of a module or object (``nl.lod``)."""
    name, obj = getattr(exc, "name", None), getattr(exc, "obj", None)
    if not isinstance(exc, AttributeError) or not isinstance(name, str) or obj is None:
        return None
    from .checks import did_you_mean
    try:
        return did_you_mean(name, [n for n in dir(obj) if not n.startswith("_")])
    except Exception:  # noqa: BLE001 - dir() of a user object may raise anything
        return None
