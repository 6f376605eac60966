"""A self-contained HTML plot of a sweep (bus bandwidth against size), no network needed to view it.

plotly (JS inlined) when installed, else matplotlib (inline SVG), else a small SVG drawn here."""
from __future__ import annotations

import html
import io
import math
from typing import Dict, List, Sequence

from ..outputs import write_text
from .collectives import CollectiveResult
from .units import format_size

_W, _H, _PAD = 760, 420, 60  # drawing box of the built-in SVG, in px
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def _series(runs: Dict[str, Sequence[CollectiveResult]]):
    return {name: ([r.size_bytes for r in rs], [r.busbw_gbps for r in rs]) for name, rs in runs.items()}


def _plotly(runs, title: str) -> str:
    import plotly.graph_objects as go  # optional extra
    fig = go.Figure()
    for name, (x, y) in _series(runs).items():
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name))
    fig.update_layout(title=title, xaxis_type="log", xaxis_title="size (bytes)", yaxis_title="busbw (GB/s)")
    return fig.to_html(include_plotlyjs=True, full_html=True)


def _matplotlib_svg(runs, title: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, (x, y) in _series(runs).items():
        ax.plot(x, y, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="size (bytes)", ylabel="busbw (GB/s)", title=title)
    ax.legend()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    return buf.getvalue()


def _builtin_svg(runs, title: str) -> str:
    ser = _series(runs)
    xs = [x for x, _ in ser.values() for x in x]
    ys = [y for _, y in ser.values() for y in y] or [0.0]
    lx0, lx1 = math.log2(min(xs)), math.log2(max(xs))
    ytop = max(ys) * 1.1 or 1.0

    def px(x: float) -> float:
        return _PAD + (0.5 if lx1 == lx0 else (math.log2(x) - lx0) / (lx1 - lx0)) * (_W - 2 * _PAD)

    def py(y: float) -> float:
        return _H - _PAD - y / ytop * (_H - 2 * _PAD)

    parts: List[str] = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}">',
                        f'<text x="{_W / 2}" y="24" text-anchor="middle">{html.escape(title)}</text>',
                        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="black"/>',
                        f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="black"/>',
                        f'<text x="{_W / 2}" y="{_H - 15}" text-anchor="middle">size</text>',
                        f'<text x="15" y="{_H / 2}" transform="rotate(-90 15 {_H / 2})" '
                        f'text-anchor="middle">busbw (GB/s)</text>']
    for i in range(5):
        y = ytop * i / 4
        parts.append(f'<text x="{_PAD - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="11">{y:.3g}</text>')
    for x in sorted(set(xs))[:: max(1, len(set(xs)) // 8)]:
        parts.append(f'<text x="{px(x):.1f}" y="{_H - _PAD + 16}" text-anchor="middle" font-size="11">'
                     f'{format_size(x)}</text>')
    for i, (name, (x, y)) in enumerate(ser.items()):
        c = _COLOURS[i % len(_COLOURS)]
        pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, y))
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>')
        parts.append(f'<text x="{_W - _PAD}" y="{_PAD + 16 * i}" text-anchor="end" fill="{c}">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_sweep_html(runs: Dict[str, Sequence[CollectiveResult]], title: str) -> str:
    """The page: one bus-bandwidth curve per system, with a table of the figures."""
    try:
        return _plotly(runs, title)
    except ImportError:
        pass
    try:
        svg = _matplotlib_svg(runs, title)
    except ImportError:
        svg = _builtin_svg(runs, title)
    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{format_size(r.size_bytes)}</td><td>{r.time_us:.2f}</td>"
                   f"<td>{r.algbw_gbps:.3f}</td><td>{r.busbw_gbps:.3f}</td><td>{html.escape(r.algorithm)}</td></tr>"
                   for n, rs in runs.items() for r in rs)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body><h2>{html.escape(title)}</h2>{svg}<table border='1' cellpadding='3'>"
            "<tr><th>system</th><th>size</th><th>time (us)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th>"
            f"<th>algorithm</th></tr>{rows}</table></body></html>")


def write_sweep_html(runs: Dict[str, Sequence[CollectiveResult]], path: str, title: str) -> None:
    """Write ``render_sweep_html`` to ``path``."""
    write_text(path, render_sweep_html(runs, title))
