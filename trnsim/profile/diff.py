"""Compare two saved runs (``trnsim kernel --json`` output or a ``--save`` file): latency, engine
shares and hotspots side by side with deltas (``b - a``; a negative latency delta is a speed-up)."""
from __future__ import annotations

import json
from typing import Optional

from ..errors import ConfigError

_NEEDED = ("latency_us", "engines")


def load_run(path: str, target: Optional[str] = None, where: str = "") -> dict:
    """One run from a JSON file; a multi-target file (``--target a,b``) needs ``target`` to pick
    one. Missing files, non-JSON and other documents raise ConfigError."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"no such file: {path}", rule="input-file", value=path,
                          where=where or path) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as e:
        raise ConfigError(f"{path} is not a JSON file ({e.__class__.__name__})",
                          rule="input-format", limit="the output of trnsim kernel --json / --save",
                          value=path, where=where or path) from None
    return pick_run(doc, target, where or path)


def pick_run(doc, target: Optional[str] = None, where: str = "") -> dict:
    """The single run in ``doc`` (a multi-target document: the one of ``target``)."""
    if isinstance(doc, dict) and isinstance(doc.get("targets"), dict):
        runs = doc["targets"]
        if target is None:
            raise ConfigError("the file holds several targets: pick one", rule="diff-target",
                              limit=sorted(runs), value=None, where=where,
                              hint="add --target NAME")
        if target not in runs:
            from ..checks import did_you_mean
            raise ConfigError(f"target {target!r} is not in the file", rule="diff-target",
                              limit=sorted(runs), value=target, where=where, hint=did_you_mean(target, runs))
        run = runs[target]
        doc = {**run.get("summary", {}), "profile": run.get("profile")}
    elif target is not None and isinstance(doc, dict) and doc.get("target") not in (None, target,
                                                                                 _canonical(target)):
        # a single-run file: --target must name its target, never be ignored
        raise ConfigError(f"the file holds one run, on {doc.get('target')}, not on {target}", rule="diff-target",
                          limit=[doc.get("target")], value=target, where=where,
                          hint="leave --target out for a single-run file")
    if not isinstance(doc, dict) or any(k not in doc for k in _NEEDED):
        raise ConfigError("not a saved trnsim run", rule="input-format",
                          limit="a JSON object with " + ", ".join(_NEEDED), value=type(doc).__name__,
                          where=where, hint="save one with trnsim kernel ... --save FILE.json")
    return doc


def _canonical(target: str) -> str:
    from ..errors import TrnsimError
    from ..options import canonical_target
    try:
        return canonical_target(target)
    except TrnsimError:
        return target


def _pair(a: float, b: float) -> dict:
    return {"a": a, "b": b, "delta": b - a, "ratio": (b / a) if a else None}


def _rows(a_rows, b_rows, key, fields, top: int) -> list:
    """Rows of a and b matched by ``key``, each field as a/b/delta, largest |time delta| first."""
    am = {key(r): r for r in a_rows or ()}
    bm = {key(r): r for r in b_rows or ()}
    out = []
    for k in list(am) + [k for k in bm if k not in am]:
        ra, rb = am.get(k, {}), bm.get(k, {})
        row = {"key": list(k) if isinstance(k, tuple) else k}
        for f in fields:
            row[f] = _pair(float(ra.get(f, 0) or 0), float(rb.get(f, 0) or 0))
        row["only_in"] = "a" if not rb else "b" if not ra else None
        if "code" in ra or "code" in rb:
            row["code"] = rb.get("code", ra.get("code", ""))
        out.append(row)
    out.sort(key=lambda r: -abs(r["time_ns"]["delta"]))
    return out[:top] if top else out


def diff_runs(a: dict, b: dict, top: int = 20) -> dict:
    """Run ``b`` against run ``a``: latency, figures, engine shares, hotspots by line and by
    opcode (matched by source line / opcode and engine), verdicts."""
    a, b = pick_run(a, where="run a"), pick_run(b, where="run b")
    figures = {k: _pair(float(a.get(k, 0) or 0), float(b.get(k, 0) or 0))
               for k in ("latency_us", "instructions", "hfu", "hbm_gbps", "hbm_bytes")
               if k in a or k in b}
    engines = {k: _pair(float(a["engines"].get(k, 0.0)), float(b["engines"].get(k, 0.0)))
               for k in list(a["engines"]) + [k for k in b["engines"] if k not in a["engines"]]
               if not k.startswith("DMA:q")}
    pa, pb = a.get("profile") or {}, b.get("profile") or {}
    ha, hb = pa.get("hotspots", {}), pb.get("hotspots", {})
    lines = _rows(ha.get("by_line"), hb.get("by_line"), lambda r: r["source"],
                  ("time_ns", "instructions"), top)
    ops = _rows(ha.get("by_opcode"), hb.get("by_opcode"), lambda r: (r["opcode"], r["engine"]),
                ("time_ns", "instructions"), top)
    lat = figures["latency_us"]
    return {"a": {"kernel": a.get("kernel"), "target": a.get("target")},
            "b": {"kernel": b.get("kernel"), "target": b.get("target")},
            "latency_us": lat, "speedup": (lat["a"] / lat["b"]) if lat["b"] else None,
            "figures": figures, "engines": engines,
            "hotspots": {"by_line": lines, "by_opcode": ops},
            "verdict": {"a": a.get("bottleneck"), "b": b.get("bottleneck")}}

