"""Processes that live exactly as long as the run: workers die with their parent, signals end a run
with one line, Ray started by trnsim is shut down on every way out.

- ``die_with_parent(parent_pid)`` is the initializer of every worker process: on Linux the kernel sends
  the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), elsewhere a watch thread exits
  the worker once it has been reparented; either way no worker outlives a killed ``trnsim``.
- ``install_signal_handlers()`` turns SIGTERM / SIGHUP into ``Terminated`` (and keeps SIGINT a
  KeyboardInterrupt), so the ``finally`` blocks that stop pools and Ray run, and the CLI prints one line
  instead of a C++ stack from a library's fatal-signal handler.
- ``on_exit(fn)`` registers a clean-up for normal exit, errors and those signals alike.

- ``time_limit(seconds, what)`` bounds a run (``trnsim kernel --timeout``).
- ``start_reaper()`` starts a watcher that ends this process's helper tree (a local Ray cluster's
  agents) when this process dies, SIGKILL included.

Imports nothing above ``errors``.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import Callable, Iterator, List, Optional

from .errors import TrnsimError

PR_SET_PDEATHSIG = 1  # linux/prctl.h
_WATCH_S = 0.5        # how often the portable watch looks at its parent


class Terminated(BaseException):
    """The run was ended by a signal (SIGTERM, SIGHUP); ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def _set_pdeathsig(sig: int) -> bool:
    """Ask the Linux kernel to send ``sig`` to this process when its parent dies; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def _watch_parent(parent_pid: int) -> None:
    """Exit this process as soon as ``parent_pid`` is no longer its parent (it died; we were reparented)."""
    stop = threading.Event()

    def loop():
        while not stop.wait(_WATCH_S):
            if os.getppid() != parent_pid:
                os._exit(1)
    threading.Thread(target=loop, name="trnsim-parent-watch", daemon=True).start()


def die_with_parent(parent_pid: Optional[int] = None) -> None:
    """Initializer of a worker process: die when the parent ``parent_pid`` dies, however it dies."""
    parent_pid = parent_pid or os.getppid()
    # a worker keeps the default SIGINT/SIGTERM behaviour: the parent decides when to stop it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    armed = _set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    if not armed:
        _watch_parent(parent_pid)


def child_dies_with_parent() -> None:
    """``preexec_fn`` of a child command: SIGTERM when its parent dies (Linux; nothing elsewhere)."""
    _set_pdeathsig(signal.SIGTERM)


_received: Optional[int] = None   # the stopping signal, kept in case its exception is swallowed


def _raise_terminated(signum, frame):  # noqa: ARG001 - signal handler signature
    global _received
    _received = signum
    raise Terminated(signum)


def received_signal() -> Optional[int]:
    """The SIGTERM/SIGHUP that arrived during the run, if any: a signal landing inside a finalizer (a lock
    release, a ``__del__``) has its exception swallowed by Python, and the run would otherwise go on as if
    nothing had happened."""
    return _received


def _quiet_unraisable(previous):
    def hook(u):
        if isinstance(u.exc_value, Terminated):   # the run still stops: ``received_signal`` remembers it
            return
        previous(u)
    return hook


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP raise ``Terminated`` in the main thread (a no-op off the main thread).  Call
    again after a library that installs its own fatal-signal handlers (Ray) has started."""
    if threading.current_thread() is not threading.main_thread():
        return
    if getattr(sys.unraisablehook, "__name__", "") != "hook":
        sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, _raise_terminated)
            except (ValueError, OSError):  # pragma: no cover - embedded interpreters
                pass


class RunTimeout(TrnsimError):
    """A run went past the ``--timeout`` its user set (an endless loop in a kernel, a huge problem)."""
    rule = "timeout"


@contextlib.contextmanager
def time_limit(seconds: Optional[float], what: str, option: str = "--timeout") -> Iterator[None]:
    """Stop the block with a ``RunTimeout`` after ``seconds`` of wall time (None: no limit).  Uses
    SIGALRM, so it bounds Python code (a kernel's own loops) from the main thread; elsewhere it is off."""
    if not seconds or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):  # noqa: ARG001 - signal handler signature
        raise RunTimeout(f"{what} did not finish within {seconds:g} s", limit=f"{seconds:g} s",
                         value=f"> {seconds:g} s", where=_user_line(frame) or f"{option} {seconds:g}",
                         hint="a loop that never ends? otherwise raise " + option)
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _user_line(frame) -> Optional[str]:
    """``file:line`` (and the code) of the innermost frame outside trnsim: where a kernel was running."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    while frame is not None:
        f = os.path.abspath(frame.f_code.co_filename)
        if not f.startswith(pkg + os.sep) and not f.startswith("<"):
            import linecache
            code = linecache.getline(f, frame.f_lineno).strip()
            return f"{f}:{frame.f_lineno}" + (f"\n    {code}" if code else "")
        frame = frame.f_back
    return None


_CLEANUPS: List[Callable[[], None]] = []


def _run_cleanups() -> None:
    while _CLEANUPS:
        fn = _CLEANUPS.pop()
        try:
            fn()
        except Exception:  # noqa: BLE001 - a failing clean-up must not hide the others
            pass


atexit.register(_run_cleanups)


def on_exit(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` once when the process ends (normally, by an error, or by a handled signal)."""
    if fn not in _CLEANUPS:
        _CLEANUPS.append(fn)
    return fn


# ------------------------------------------------------------------ a reaper for helper process trees
def _children_map() -> dict:
    """{parent pid: [(child pid, start time)]} of every process (Linux /proc)."""
    out: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out.setdefault(int(fields[1]), []).append((int(name), fields[19]))
    return out


def _descendants(root: int, children: dict) -> set:
    seen, todo = set(), [root]
    while todo:
        for pid, start in children.get(todo.pop(), ()):
            if (pid, start) not in seen:
                seen.add((pid, start))
                todo.append(pid)
    return seen


def _reap(parent: int, interval_s: float = _WATCH_S) -> None:
    """The reaper's loop: remember ``parent``'s process tree; when ``parent`` is gone (its pipe on our
    stdin closes), end every process of that tree still running (Ray's agents outlive a killed driver)."""
    import select
    me = os.getpid()
    known: set = set()
    while True:
        known |= {p for p in _descendants(parent, _children_map()) if p[0] != me}
        ready, _, _ = select.select([sys.stdin], [], [], interval_s)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break
    current = {}
    for pid, start in known:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[19] == start:   # the same process, not a reused pid
                    current[pid] = start
        except (OSError, IndexError):
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in list(current):
            try:
                os.kill(pid, sig)
            except OSError:
                current.pop(pid, None)
        if not current:
            break
        import time
        time.sleep(2.0)


_REAPER = []


def start_reaper() -> None:
    """Start (once) a watcher process that ends this process's helper tree (Ray's local cluster) when
    this process dies, even by SIGKILL; Linux only (it reads /proc)."""
    if _REAPER or not os.path.isdir("/proc/self"):
        return
    import subprocess
    code = f"from trnsim.lifetime import _reap; _reap({os.getpid()})"
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    except OSError:  # pragma: no cover - no process to spare: the exit paths still shut Ray down
        return
    _REAPER.append(p)


def kill_processes(procs) -> None:
    """SIGKILL every still-running ``multiprocessing.Process`` of ``procs`` and reap it."""
    for p in list(procs):
        try:
            if p.is_alive():
                p.kill()
        except (OSError, ValueError, AttributeError):
            pass
    for p in list(procs):
        try:
            p.join(timeout=2)
        except (OSError, ValueError, AttributeError, AssertionError):
            pass
