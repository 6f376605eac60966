"""Shared terminal output: rich tables by default, JSON with --json, progress bars for long work."""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table


def console() -> Console:
    return Console(highlight=False)


def error_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_json(obj: Any) -> None:
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
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t
