"""Shared terminal output: rich tables by default, JSON with --json, progress bars for long work."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Iterable, Optional, Sequence

from rich.console import Console
from rich.table import Table

from ..outputs import dumps_strict


# width when the output is not a terminal (a file, a pipe, CI logs) and $COLUMNS is unset: wide
# enough that no table cell or quoted source line is ever split; tables still shrink to their text
PIPE_WIDTH = 100_000


def _width(stream) -> Optional[int]:
    """The real terminal width (rich finds it: None), $COLUMNS, or no wrapping when piped."""
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return None  # rich reads $COLUMNS itself
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty else PIPE_WIDTH


def console() -> Console:
    """A rich console on stdout (no automatic highlighting of numbers; unwrapped when piped)."""
    w = _width(sys.stdout)
    return Console(highlight=False, width=w, soft_wrap=w is not None)


def error_console() -> Console:
    """A rich console on stderr, for errors and progress (unwrapped when piped)."""
    w = _width(sys.stderr)
    return Console(stderr=True, highlight=False, width=w, soft_wrap=w is not None)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented, strict JSON on stdout (numpy scalars, tuples and sets converted;
    NaN and infinity, which strict JSON has no word for, printed as null)."""
    sys.stdout.write(dumps_strict(obj, default=_default, indent=2, sort_keys=False))
    sys.stdout.write("\n")


def _default(o: Any):
    import numpy as np
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "_asdict"):
        return o._asdict()
    return str(o)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A titled rich table of ``rows`` (cells turned into text)."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


class Spinner:
    """A transient progress line on stderr (instructions simulated, or a fixed label) for work
    longer than a second: ``with Spinner(not args.json): ...``."""

    def __init__(self, enabled: bool, label: str = ""):
        self.enabled = enabled
        self.label = label  # a fixed description; empty: count the instructions simulated
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        """Start the progress line (after a second, on stderr) unless disabled."""
        if not self.enabled:
            return self
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from ..nki import harness

        def loop():
            if self.stop.wait(1.0):
                return
            from rich.console import Console
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                          transient=True, console=Console(stderr=True)) as prog:
                task = prog.add_task(self.label or "simulating", total=None)
                while not self.stop.wait(0.2):
                    if self.label:
                        continue
                    n = sum(len(t.instructions) for t in list(harness.ACTIVE_TRACES))
                    prog.update(task, description=f"simulating: {n:,} instructions")
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        """Stop and erase the progress line."""
        self.stop.set()
        if self.thread:
            self.thread.join()
        return False
