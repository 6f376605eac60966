"""Charts of a comparison report, drawn by a plotting library: plotly (script inlined once per page) when
installed, else matplotlib as inline SVG; with neither, ``render`` returns None and the page says how to get
charts (``pip install trnsim[report]``). Nothing here draws SVG by hand."""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Chart:
    """A chart spec: ``kind`` scatter (labelled points + a frontier line), line (a series against x), bar,
    stacked (bars of parts) or range (a low-high bar with a base marker per category)."""
    id: str
    title: str
    kind: str
    x: Tuple                                  # categories (bar/stacked/range) or x values (scatter)
    series: Tuple[Tuple[str, Tuple], ...]     # (name, values) pairs; range: ("low", ...), ("base", ...), ("high", ...)
    x_title: str = ""
    y_title: str = ""
    labels: Tuple[str, ...] = ()              # scatter point labels
    frontier: Tuple[Tuple[float, float], ...] = ()
    log_x: bool = False
    log_y: bool = False
    notes: Tuple[str, ...] = field(default=())


def backend() -> Optional[str]:
    """Which library will draw: "plotly", "matplotlib" or None."""
    for name in ("plotly", "matplotlib"):
        try:
            __import__(name)
            return name
        except ImportError:
            continue
    return None


def plotly_script() -> str:
    """The plotly.js bundle as one inline <script> (the page needs no network)."""
    from plotly.offline import get_plotlyjs
    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def _plotly(c: Chart) -> str:
    import plotly.graph_objects as go
    fig = go.Figure()
    if c.kind == "scatter":
        xs, ys = c.x, c.series[0][1]
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="markers+text", text=list(c.labels),
                                 textposition=label_positions(xs, ys, c.log_x, c.log_y),
                                 name=c.series[0][0], marker=dict(size=11)))
        if c.frontier:
            fx, fy = zip(*c.frontier)
            fig.add_trace(go.Scatter(x=list(fx), y=list(fy), mode="lines", name="Pareto frontier",
                                     line=dict(dash="dash")))
    elif c.kind == "line":
        for name, vals in c.series:
            fig.add_trace(go.Scatter(x=list(c.x), y=list(vals), mode="lines+markers", name=name))
    elif c.kind in ("bar", "stacked"):
        for name, vals in c.series:
            fig.add_trace(go.Bar(x=list(c.x), y=list(vals), name=name))
        fig.update_layout(barmode="stack" if c.kind == "stacked" else "group")
    elif c.kind == "range":
        s = dict(c.series)
        lo, base, hi = s["low"], s["base"], s["high"]
        fig.add_trace(go.Bar(x=list(c.x), y=[h - lo_ for lo_, h in zip(lo, hi)], base=list(lo),
                             name="+-band range", opacity=0.5))
        fig.add_trace(go.Scatter(x=list(c.x), y=list(base), mode="markers", name="base",
                                 marker=dict(size=12, symbol="diamond")))
    fig.update_layout(title=c.title, xaxis_title=c.x_title, yaxis_title=c.y_title, height=420,
                      margin=dict(l=60, r=20, t=50, b=80), template="plotly_white")
    if c.log_x:
        fig.update_xaxes(type="log")
    if c.log_y:
        fig.update_yaxes(type="log")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=c.id + "-plot",
                       config={"displaylogo": False, "responsive": True})


def _matplotlib(c: Chart) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    if c.kind == "scatter":
        ax.scatter(c.x, c.series[0][1], s=50)
        for x, y, t in zip(c.x, c.series[0][1], c.labels):
            ax.annotate(t, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        if c.frontier:
            fx, fy = zip(*c.frontier)
            ax.plot(fx, fy, linestyle="--", label="Pareto frontier")
            ax.legend()
    elif c.kind == "line":
        for name, vals in c.series:
            ax.plot(c.x, vals, marker="o", label=name)
    elif c.kind in ("bar", "stacked"):
        pos = list(range(len(c.x)))
        bottom = [0.0] * len(c.x)
        width = 0.8 / (1 if c.kind == "stacked" else len(c.series))
        for i, (name, vals) in enumerate(c.series):
            if c.kind == "stacked":
                ax.bar(pos, vals, bottom=bottom, label=name)
                bottom = [b + v for b, v in zip(bottom, vals)]
            else:
                ax.bar([p + i * width for p in pos], vals, width=width, label=name)
        ax.set_xticks(pos, c.x, rotation=30, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    elif c.kind == "range":
        s = dict(c.series)
        pos = list(range(len(c.x)))
        ax.bar(pos, [h - lo for lo, h in zip(s["low"], s["high"])], bottom=s["low"], alpha=0.5, label="+-band range")
        ax.scatter(pos, s["base"], marker="D", zorder=3, label="base")
        ax.set_xticks(pos, c.x, rotation=30, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    ax.set(title=c.title, xlabel=c.x_title, ylabel=c.y_title)
    if c.log_x:
        ax.set_xscale("log")
    if c.log_y:
        ax.set_yscale("log")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def render(c: Chart, which: Optional[str] = None) -> Optional[str]:
    """HTML fragment of one chart with the available (or named) library; None when none is installed."""
    which = which or backend()
    if which == "plotly":
        return _plotly(c)
    if which == "matplotlib":
        return _matplotlib(c)
    return None


# where a point's label goes, tried in order until it does not collide with a label placed before
_POSITIONS = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left")
_NEAR = 0.08   # labels of points closer than this share of both axis ranges would overlap


def label_positions(xs: Sequence[float], ys: Sequence[float], log_x: bool = False,
                    log_y: bool = False) -> List[str]:
    """A text position per scatter point such that no two nearby points put their labels on the same
    side (the p5 and p5en points sit close together and their labels overlapped)."""
    import math
    tx = [math.log10(x) if log_x and x > 0 else float(x) for x in xs]
    ty = [math.log10(y) if log_y and y > 0 else float(y) for y in ys]
    span_x = (max(tx) - min(tx)) or 1.0
    span_y = (max(ty) - min(ty)) or 1.0
    out: List[str] = []
    for i in range(len(tx)):
        near = {out[j] for j in range(i) if abs(tx[i] - tx[j]) < _NEAR * span_x
                and abs(ty[i] - ty[j]) < _NEAR * span_y}
        out.append(next((p for p in _POSITIONS if p not in near), _POSITIONS[i % len(_POSITIONS)]))
    return out


def pareto_frontier(points: Sequence[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """Points not dominated in (time, cost), both lower-is-better, sorted by time."""
    out: List[Tuple[float, float]] = []
    for x, y in sorted(points):
        if not out or y < out[-1][1]:
            out.append((x, y))
    return out
