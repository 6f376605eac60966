"""Every file trnsim writes, written atomically, and every JSON document it prints, strict.

``atomic_output(path)`` opens a temporary file in the target's own folder, and only when the writer is
done flushes it, fsyncs it and renames it over the target: a kill or a full disk mid-write leaves the
previous file as it was and no truncated one.  A target that exists but is not a regular file (a device,
a FIFO, a folder) is refused, never opened or deleted.  A missing, read-only or full folder is a
``ConfigError`` naming the path (exit 2), not a traceback.  ``dumps_strict`` turns NaN and infinity into
``null`` so that every JSON trnsim emits parses with any strict reader.

Imports nothing above ``errors``: every layer may write through it.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
from typing import Any, Callable, Iterator, Optional

from .errors import ConfigError


def _fail(path: str, option: Optional[str], e: OSError) -> ConfigError:
    reason = e.strerror or str(e)
    hint = {errno.ENOSPC: "free some space or write elsewhere", errno.EDQUOT: "free some space or write elsewhere",
            errno.ENOENT: f"create the folder first: mkdir -p {os.path.dirname(path) or '.'}",
            errno.EACCES: "choose a folder you can write to", errno.EROFS: "choose a writable folder"}.get(e.errno)
    return ConfigError(f"cannot write {path}: {reason}", rule="output-write", value=path,
                       where=f"{option} {path}" if option else path, hint=hint)


def check_target(path: str, option: Optional[str] = None) -> str:
    """The real path a writer may replace: its folder exists, and the target is absent or a regular file
    (a symlink is followed to the file it names).  Anything else is a ConfigError."""
    where = f"{option} {path}" if option else str(path)
    p = os.path.realpath(os.path.expanduser(os.fspath(path)))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _fail(str(path), option, e) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise ConfigError(f"the output {path} is {what}; trnsim only writes regular files", rule="output-path",
                          value=str(path), where=where, hint="name a new or existing regular file")
    folder = os.path.dirname(p) or "."
    if not os.path.isdir(folder):
        raise ConfigError(f"the folder of {path} does not exist: {folder}", rule="output-path", value=str(path),
                          where=where, hint=f"create it first: mkdir -p {folder}")
    return p


def _mode_for(target: str) -> int:
    """The permissions the file would have had if written directly: the old file's, else 0666 - umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str, option: Optional[str] = None) -> Iterator[str]:
    """A temporary path beside ``path`` for a writer that takes a path (pyarrow, numpy); renamed over
    ``path`` when the block ends without an exception, removed otherwise."""
    target = check_target(path, option)
    folder, base = os.path.split(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
        os.close(fd)
    except OSError as e:
        raise _fail(str(path), option, e) from None
    try:
        yield tmp
        _commit(tmp, target)
    except OSError as e:
        _discard(tmp)
        raise _fail(str(path), option, e) from None
    except BaseException:
        _discard(tmp)
        raise


def _commit(tmp: str, target: str) -> None:
    """fsync the finished temporary file, give it the target's permissions, rename it over the target."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, _mode_for(target))
    os.replace(tmp, target)
    with contextlib.suppress(OSError):  # the rename itself is durable once the folder is synced
        dfd = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_output(path: str, option: Optional[str] = None, mode: str = "w", encoding: Optional[str] = "utf-8",
                  newline: Optional[str] = None) -> Iterator[Any]:
    """``open(path, mode)`` made atomic: the file object of a temporary file beside ``path``, flushed,
    fsynced and renamed over ``path`` when the block ends; on any error the old file stays untouched."""
    with atomic_path(path, option) as tmp:
        kw = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()


def write_text(path: str, text: str, option: Optional[str] = None) -> str:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_output(path, option) as f:
        f.write(text)
    return path


# ------------------------------------------------------------------------------- strict JSON
def sanitize(obj: Any, default: Optional[Callable[[Any], Any]] = None) -> Any:
    """``obj`` with every non-finite float replaced by None (numpy scalars, tuples and sets converted
    through ``default``), ready for ``json.dumps(..., allow_nan=False)``."""
    def walk(o: Any, depth: int) -> Any:
        if depth > 500:
            raise ConfigError("the document is nested too deeply to write as JSON", rule="json-depth",
                              limit="500 levels", value=depth)
        if isinstance(o, float):
            return o if math.isfinite(o) else None
        if o is None or isinstance(o, (str, bool, int)):
            return o
        if isinstance(o, dict):
            return {(k if isinstance(k, (str, int, float, bool)) or k is None else str(k)): walk(v, depth + 1)
                    for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [walk(v, depth + 1) for v in o]
        if default is not None:
            return walk(default(o), depth + 1)
        return str(o)
    return walk(obj, 0)


def dumps_strict(obj: Any, default: Optional[Callable[[Any], Any]] = None, **kw: Any) -> str:
    """JSON text of ``obj`` with no bare NaN or Infinity (they become null)."""
    return json.dumps(sanitize(obj, default), allow_nan=False, **kw)


def json_default(o: Any) -> Any:
    """Plain values for numpy scalars and arrays, tuples, sets and named tuples (else ``str``)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if np is not None and isinstance(o, np.generic):
        return o.item()
    if np is not None and isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    if isinstance(o, tuple):
        return o._asdict() if hasattr(o, "_asdict") else list(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)
