"""The recording session of one process: graphs cut at each ``mark_step``, costed once per distinct
structure, a line per step, and at exit the summary (and the report, trace and JSON files asked for).

Configured by the environment ``trnsim exec --instance`` sets (``TRNSIM_XLA_INSTANCE``, ``_REPORT``,
``_TRACE``, ``_JSON``); under torchrun only rank 0 records (data-parallel ranks run the same graph).
"""
from __future__ import annotations

import atexit
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .cache import GraphCache, graph_hash, graph_key
from .costing import Estimator, StepEstimate
from .graphs import graph_ops
from .recorder import Call, Recorder, short_loc
from .shapes import why_new

ENV_INSTANCE, ENV_REPORT, ENV_TRACE, ENV_JSON = ("TRNSIM_XLA_INSTANCE", "TRNSIM_XLA_REPORT", "TRNSIM_XLA_TRACE",
                                                 "TRNSIM_XLA_JSON")
ENV_QUIET = "TRNSIM_XLA_QUIET"   # "1": no per-step lines (the summary is still printed)


@dataclass
class GraphInfo:
    """One distinct graph: its calls, estimate, how it was obtained and why it is new."""
    id: int
    hash: str
    calls: List[Call]
    est: StepEstimate
    first_step: int
    status: str            # "compiled" (new to the cache) | "cache hit" (an earlier run compiled it)
    reason: str            # what differs from the previous step's graph ("" for the first graph)
    uses: int = 0


def does_device_work(calls: List[Call]) -> bool:
    """True when a cut holds something the device would run: an op with FLOPs or bytes, a collective, or
    an op with no Trainium lowering (reported); views and scalar reads (``aten::_local_scalar_dense``) alone
    are not a graph."""
    g = graph_ops(calls)
    return bool(g.collectives or g.unlowered or any(it.op.flops > 0 or it.op.bytes > 0 for it in g.items))


@dataclass(frozen=True)
class StepRecord:
    """One executed graph (one ``mark_step``)."""
    step: int
    graph: int
    est_s: float
    cpu_s: float
    new: bool


@dataclass
class Session:
    """Everything one process records."""
    instance: str
    world: int = 1
    rank: int = 0
    hardware_file: Optional[str] = None
    report: Optional[str] = None
    trace: Optional[str] = None
    json_path: Optional[str] = None
    quiet: bool = False
    cache: Optional[GraphCache] = None
    graphs: Dict[tuple, GraphInfo] = field(default_factory=dict)
    steps: List[StepRecord] = field(default_factory=list)
    recorder: Optional[Recorder] = None
    estimator: Optional[Estimator] = None
    _prev: List[Call] = field(default_factory=list)
    _t0: float = 0.0
    _done: bool = False

    def start(self) -> None:
        """Check the instance, enter the recorder, and arrange the summary at exit."""
        self.estimator = Estimator(self.instance, self.world, self.hardware_file)
        self.cache = self.cache or GraphCache()
        self.recorder = Recorder()
        self.recorder.start()
        self._t0 = time.perf_counter()
        atexit.register(self.finish)

    def mark_step(self) -> Optional[StepRecord]:
        """Cut the graph recorded since the last step, cost it if its structure is new, print one line."""
        rec = self.recorder
        if rec is None:
            return None
        cpu = time.perf_counter() - self._t0
        calls = rec.cut()
        if not calls:
            self._t0 = time.perf_counter()
            return None
        rec.enabled = False
        try:
            if not does_device_work(calls):
                # only host reads since the last cut (a `loss.item()` between steps, a print): no graph runs
                # on the device, so it is no step of its own; its CPU time stays with the next step
                return None
            r = self._account(calls, cpu)
        finally:
            rec.enabled = True
            self._t0 = time.perf_counter()
        return r

    def _account(self, calls: List[Call], cpu: float) -> StepRecord:
        key = graph_key(calls)
        info = self.graphs.get(key)
        new = info is None
        step = len(self.steps) + 1
        if new:
            est = self.estimator.estimate(graph_ops(calls))
            h = graph_hash(key, f"{est.instance}|{est.lnc}|{self.world}|")
            hit = self.cache.lookup_or_store(h, {"instance": est.instance, "ops": len(calls),
                                                 "step_s": est.step_s, "first_line": short_loc(calls[0].loc)})
            reason = why_new(self._prev, calls) if self._prev else ""
            if step == 2 and reason:   # graph 1 held everything before the first mark_step as well
                reason = ("the first graph also ran the script's set-up before step 1 (model init, first batch); "
                          f"here: {reason}")
            info = GraphInfo(len(self.graphs) + 1, h, calls, est, step, "cache hit" if hit else "compiled", reason)
            self.graphs[key] = info
        info.uses += 1
        self._prev = calls
        r = StepRecord(step, info.id, info.est.step_s, cpu, new)
        self.steps.append(r)
        if not self.quiet:
            from .console import step_line
            print(step_line(r, info, new), file=sys.stderr, flush=True)
        return r

    def finish(self) -> None:
        """Print the summary and write the files asked for (once, at exit)."""
        if self._done or self.recorder is None:
            return
        self._done = True
        self.recorder.enabled = False
        self.recorder.stop()
        from .console import print_summary
        from .summary import summarize
        s = summarize(self)
        print_summary(s, sys.stderr)
        if self.json_path:
            from ...outputs import dumps_strict, write_text
            write_text(self.json_path, dumps_strict(s, default=str, indent=2))
        if self.report:
            from .report_html import write_report
            write_report(self, s, self.report)
        if self.trace:
            from .trace import write_trace
            write_trace(self, self.trace)


_SESSION: Optional[Session] = None


def current() -> Optional[Session]:
    """The running session, if recording is on in this process."""
    return _SESSION


def start_from_env(env: Optional[dict] = None) -> Optional[Session]:
    """Start recording when ``TRNSIM_XLA_INSTANCE`` is set (once per process; rank 0 only)."""
    global _SESSION
    env = os.environ if env is None else env
    if _SESSION is not None or not env.get(ENV_INSTANCE):
        return _SESSION
    rank = int(env.get("RANK", "0") or 0)
    if rank != 0:
        return None
    _SESSION = Session(instance=env[ENV_INSTANCE], world=int(env.get("WORLD_SIZE", "1") or 1), rank=rank,
                       hardware_file=env.get("TRNSIM_HARDWARE") or None, report=env.get(ENV_REPORT) or None,
                       trace=env.get(ENV_TRACE) or None, json_path=env.get(ENV_JSON) or None,
                       quiet=env.get(ENV_QUIET, "") == "1")
    _SESSION.start()
    return _SESSION


def close() -> Optional[Session]:
    """Stop recording in this process without the exit summary (for in-process use); returns the session."""
    global _SESSION
    s, _SESSION = _SESSION, None
    if s is not None:
        s._done = True
        if s.recorder is not None:
            s.recorder.enabled = False
            s.recorder.stop()
    return s


def mark_step() -> None:
    """The step boundary of the running session (a no-op when not recording)."""
    if _SESSION is not None:
        _SESSION.mark_step()
