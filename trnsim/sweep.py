"""Estimates a user can explore: one estimate repeated over the values of one parameter (``trnsim estimate
... --sweep batch=1,8,32``), as a table, JSON, a notebook view and an HTML page of line charts.  A value whose
layout is refused (does not fit, does not divide) stays in the table with the reason."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import ConfigError, TrnsimError

# sweepable parameter (as the user writes it) -> the estimator's keyword, per kind of estimate
PARAMS: Mapping[str, Mapping[str, str]] = {
    "infer": {"batch": "batch", "seq": "input_len", "input": "input_len", "output": "output_len", "tp": "tp",
              "pp": "pp", "nodes": "nodes"},
    "train": {"seq": "seq", "tp": "tp", "pp": "pp", "dp": "dp", "nodes": "nodes", "micro-batch": "micro_batch",
              "global-batch": "global_batch", "batch": "global_batch"},
}
# the figures a sweep shows per kind: (result attribute, column title)
METRICS: Mapping[str, Tuple[Tuple[str, str], ...]] = {
    "infer": (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("output_tokens_per_s", "output tokens/s"),
              ("memory_per_core_gib", "memory per rank (GiB)")),
    "train": (("step_time_s", "step time (s)"), ("tokens_per_s", "tokens/s"), ("mfu", "MFU"),
              ("memory_per_core_gib", "memory per rank (GiB)")),
}


class SweepError(ConfigError):
    """A malformed --sweep."""
    rule = "sweep"


def parse_sweep(text: str, kind: str) -> Tuple[str, Tuple[int, ...]]:
    """``"batch=1,8,32"`` -> ("batch", (1, 8, 32)); the parameter must be sweepable for ``kind``, the values
    distinct positive integers."""
    name, sep, vals = str(text).partition("=")
    name = name.strip().lower().replace("_", "-")
    known = PARAMS[kind]
    if not sep or name not in known:
        import difflib
        near = difflib.get_close_matches(name, list(known), n=1)
        raise SweepError(f"--sweep takes PARAM=V1,V2,... with PARAM one of {', '.join(known)}", limit=list(known),
                         value=text, hint=f"did you mean {near[0]}?" if near else "e.g. --sweep batch=1,8,32")
    out: List[int] = []
    for v in vals.split(","):
        v = v.strip()
        if not v.isdigit() or int(v) < 1:
            raise SweepError(f"--sweep values must be positive integers, got {v!r}", limit=">= 1", value=text)
        if int(v) in out:
            raise SweepError(f"--sweep lists {v} twice", value=text)
        out.append(int(v))
    from .checks import limits
    cap = int(limits()["estimate_sweep"]["max_points"])
    if not out or len(out) > cap:
        raise SweepError(f"--sweep takes 1 to {cap} values", limit=cap, value=len(out))
    return name, tuple(out)


@dataclass(frozen=True)
class Sweep:
    """The estimates of one sweep, in the order of its values (``None`` where the value was refused)."""
    kind: str
    param: str
    values: Tuple[int, ...]
    results: Tuple[Any, ...]
    errors: Tuple[Optional[str], ...]
    title: str = ""
    notes: Tuple[str, ...] = field(default=())

    def table(self) -> Tuple[List[str], List[List[str]]]:
        """Column titles and one row per value (the refusal's message where it was refused)."""
        cols = [self.param] + [t for _, t in METRICS[self.kind]]
        rows = []
        for v, r, err in zip(self.values, self.results, self.errors):
            if r is None:
                rows.append([str(v), f"refused: {err}"] + [""] * (len(cols) - 2))
            else:
                rows.append([str(v)] + [_fmt(getattr(r, a)) for a, _ in METRICS[self.kind]])
        return cols, rows

    def to_dict(self) -> Dict[str, Any]:
        """JSON record: the parameter, its values and each estimate (or its refusal)."""
        return {"kind": self.kind, "param": self.param, "values": list(self.values),
                "points": [{"value": v, "estimate": r.to_dict() if r is not None else None, "error": e}
                           for v, r, e in zip(self.values, self.results, self.errors)],
                "notes": list(self.notes)}

    def _repr_html_(self) -> str:
        cols, rows = self.table()
        return _html_table(cols, rows)


def _fmt(x: float) -> str:
    if not isinstance(x, float):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _html_table(cols: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def sweep(kind: str, param: str, values: Sequence[int], estimate: Optional[Callable[..., Any]] = None,
          progress: Optional[Callable[[str], None]] = None, **kwargs) -> Sweep:
    """Run ``estimate`` (default: the model layer's training or inference estimator) once per value of
    ``param`` with the other keyword arguments fixed."""
    if kind not in PARAMS:
        raise SweepError(f"unknown estimate kind {kind!r}", limit=list(PARAMS), value=kind)
    if param not in PARAMS[kind]:
        raise SweepError(f"cannot sweep {param!r} of a {kind} estimate", limit=list(PARAMS[kind]), value=param)
    if estimate is None:
        from .model import estimate_inference, estimate_training
        estimate = estimate_training if kind == "train" else estimate_inference
    key = PARAMS[kind][param]
    results, errors = [], []
    for v in values:
        if progress:
            progress(f"{param}={v}")
        try:
            results.append(estimate(**{**kwargs, key: int(v)}))
            errors.append(None)
        except TrnsimError as e:   # a refused layout is a point of the sweep, not its end
            results.append(None)
            errors.append(getattr(e, "message", str(e)))
    if all(r is None for r in results):
        raise SweepError(f"every value of the {param} sweep was refused: {errors[0]}", value=list(values))
    model = kwargs.get("model")
    title = f"{kind} {getattr(model, 'name', model)} on {kwargs.get('instance', '')}: {param} sweep"
    return Sweep(kind, param, tuple(values), tuple(results), tuple(errors), title)


def sweep_page(s: Sweep) -> str:
    """A self-contained HTML page: the table and one line chart per figure against the swept parameter."""
    from .report.charts import Chart, backend, plotly_script, render
    from .report.html import _CSS
    which = backend()
    cols, rows = s.table()
    parts = [f"<h1>{html.escape(s.title)}</h1>", _html_table(cols, rows)]
    ok = [(v, r) for v, r in zip(s.values, s.results) if r is not None]
    for attr, title in METRICS[s.kind]:
        c = Chart(id=f"sweep-{attr}", title=f"{title} against {s.param}", kind="line",
                  x=tuple(v for v, _ in ok), series=((title, tuple(float(getattr(r, attr)) for _, r in ok)),),
                  x_title=s.param, y_title=title)
        frag = render(c, which) if which else None
        if frag:
            parts.append(f'<div class="chart" id="{c.id}">{frag}</div>')
    head = f"<meta charset=\"utf-8\"><title>{html.escape(s.title)}</title><style>{_CSS}</style>"
    if which == "plotly":
        head += plotly_script()
    return f"<!DOCTYPE html>\n<html><head>{head}</head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
