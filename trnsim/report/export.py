"""Write a comparison (or evaluation) as HTML, Markdown or CSV files."""
from __future__ import annotations

import csv
from typing import Dict, List, Optional

from ..outputs import atomic_output
from .html import page
from .tables import all_tables, csv_rows, markdown


def _write(path: str, text: str) -> str:
    with atomic_output(path, newline="") as f:
        f.write(text)
    return path


def to_markdown(d: Dict, title: str = "trnsim compare", sections_before: Optional[List[str]] = None,
                sections_after: Optional[List[str]] = None) -> str:
    """The report's tables and summary as Markdown."""
    out = [f"# {title}", "", d["summary"], ""] + list(sections_before or [])
    out += [markdown(t, tab) for _, t, tab in all_tables(d)]
    out += list(sections_after or [])
    return "\n".join(out)


def write_html(d: Dict, path: str, title: str = "trnsim compare", sections_before: Optional[List[str]] = None,
               sections_after: Optional[List[str]] = None) -> str:
    """Write the self-contained HTML report; returns the path."""
    return _write(path, page(d, title, sections_before, sections_after=sections_after))


def write_markdown(d: Dict, path: str, title: str = "trnsim compare",
                   sections_before: Optional[List[str]] = None, sections_after: Optional[List[str]] = None) -> str:
    """Write the Markdown export; returns the path."""
    return _write(path, to_markdown(d, title, sections_before, sections_after))


def write_csv(d: Dict, path: str) -> str:
    """Write one CSV row per system with raw numbers; returns the path."""
    cols, rows = csv_rows(d)
    with atomic_output(path, newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerows(rows)
    return path
