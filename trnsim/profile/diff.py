"""Compare two saved runs (``trnsim kernel --json`` output or a ``--save`` file): latency, engine
shares and hotspots side by side with deltas (``b - a``; a negative latency delta is a speed-up)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

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


@dataclass(frozen=True)
class Pair:
    """One figure in run a and run b, ``b - a`` and ``b / a`` (None when a is 0)."""
    a: float
    b: float

    @property
    def delta(self) -> float:
        """``b - a``."""
        return self.b - self.a

    @property
    def ratio(self) -> Optional[float]:
        """``b / a``, None when a is 0."""
        return (self.b / self.a) if self.a else None

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {"a": self.a, "b": self.b, "delta": self.delta, "ratio": self.ratio}


@dataclass(frozen=True)
class RowDelta:
    """A hotspot row (a source line, or an opcode on an engine) in both runs."""
    key: Union[str, Tuple[str, str]]
    time_ns: Pair
    instructions: Pair
    only_in: Optional[str]          # "a" or "b" when the row is in one run only
    code: Optional[str] = None      # the source line's text (by-line rows)

    def to_dict(self) -> dict:
        """JSON-ready (a tuple key as a list)."""
        out = {"key": list(self.key) if isinstance(self.key, tuple) else self.key,
               "time_ns": self.time_ns.to_dict(), "instructions": self.instructions.to_dict(),
               "only_in": self.only_in}
        if self.code is not None:
            out["code"] = self.code
        return out


@dataclass(frozen=True)
class RunId:
    """Which kernel on which target a run is."""
    kernel: Optional[str]
    target: Optional[str]


@dataclass(frozen=True)
class RunDiff:
    """Run b against run a: figures, engine shares, hotspots and verdicts."""
    a: RunId
    b: RunId
    figures: Dict[str, Pair]        # latency_us always; instructions, hfu, hbm_* when saved
    engines: Dict[str, Pair]
    by_line: List[RowDelta]
    by_opcode: List[RowDelta]
    verdict_a: Optional[str]
    verdict_b: Optional[str]

    @property
    def latency_us(self) -> Pair:
        """Latency in both runs."""
        return self.figures["latency_us"]

    @property
    def speedup(self) -> Optional[float]:
        """How many times faster b is than a (None when b's latency is 0)."""
        lat = self.latency_us
        return (lat.a / lat.b) if lat.b else None

    def to_dict(self) -> dict:
        """JSON-ready (what ``trnsim diff --json`` prints)."""
        return {"a": {"kernel": self.a.kernel, "target": self.a.target},
                "b": {"kernel": self.b.kernel, "target": self.b.target},
                "latency_us": self.latency_us.to_dict(), "speedup": self.speedup,
                "figures": {k: v.to_dict() for k, v in self.figures.items()},
                "engines": {k: v.to_dict() for k, v in self.engines.items()},
                "hotspots": {"by_line": [r.to_dict() for r in self.by_line],
                             "by_opcode": [r.to_dict() for r in self.by_opcode]},
                "verdict": {"a": self.verdict_a, "b": self.verdict_b}}


def _num(row: dict, f: str) -> float:
    return float(row.get(f, 0) or 0)


def _rows(a_rows, b_rows, key, top: int) -> List[RowDelta]:
    """Rows of a and b matched by ``key``, time and instructions as Pairs, largest |time delta|
    first."""
    am = {key(r): r for r in a_rows or ()}
    bm = {key(r): r for r in b_rows or ()}
    out = []
    for k in list(am) + [k for k in bm if k not in am]:
        ra, rb = am.get(k, {}), bm.get(k, {})
        code = rb.get("code", ra.get("code", "")) if ("code" in ra or "code" in rb) else None
        out.append(RowDelta(k, Pair(_num(ra, "time_ns"), _num(rb, "time_ns")),
                            Pair(_num(ra, "instructions"), _num(rb, "instructions")),
                            "a" if not rb else "b" if not ra else None, code))
    out.sort(key=lambda r: -abs(r.time_ns.delta))
    return out[:top] if top else out


def diff_runs(a: dict, b: dict, top: int = 20) -> RunDiff:
    """Run ``b`` against run ``a`` (saved JSON documents): latency, figures, engine shares,
    hotspots by line and by opcode (matched by source line / opcode and engine), verdicts."""
    a, b = pick_run(a, where="run a"), pick_run(b, where="run b")
    figures = {k: Pair(_num(a, k), _num(b, k))
               for k in ("latency_us", "instructions", "hfu", "hbm_gbps", "hbm_bytes")
               if k in a or k in b}
    engines = {k: Pair(float(a["engines"].get(k, 0.0)), float(b["engines"].get(k, 0.0)))
               for k in list(a["engines"]) + [k for k in b["engines"] if k not in a["engines"]]
               if not k.startswith("DMA:q")}
    pa, pb = a.get("profile") or {}, b.get("profile") or {}
    ha, hb = pa.get("hotspots", {}), pb.get("hotspots", {})
    return RunDiff(RunId(a.get("kernel"), a.get("target")), RunId(b.get("kernel"), b.get("target")),
                   figures, engines,
                   _rows(ha.get("by_line"), hb.get("by_line"), lambda r: r["source"], top),
                   _rows(ha.get("by_opcode"), hb.get("by_opcode"),
                         lambda r: (r["opcode"], r["engine"]), top),
                   a.get("bottleneck"), b.get("bottleneck"))
