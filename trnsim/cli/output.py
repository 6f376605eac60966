"""Shared terminal output: rich tables by default, JSON with --json, progress bars for long work."""
from __future__ import annotations

import json
import sys
import threading
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table


def console() -> Console:
    """A rich console on stdout (no automatic highlighting of numbers)."""
    return Console(highlight=False)


def error_console() -> Console:
    """A rich console on stderr, for errors and progress."""
    return Console(stderr=True, highlight=False)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (numpy scalars, tuples and sets converted)."""
    json.dump(obj, sys.stdout, indent=2, default=_default, sort_keys=False)
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
