"""Reports of a comparison or evaluation: self-contained HTML (plotly or matplotlib charts), Markdown, CSV."""
from .export import to_markdown, write_csv, write_html, write_markdown
from .html import page

__all__ = ["page", "to_markdown", "write_csv", "write_html", "write_markdown"]
