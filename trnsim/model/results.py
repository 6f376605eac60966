"""Frozen result records of the estimators, each with ``to_dict()`` for JSON."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .colltable import CollectiveGroup


def _html_figures(title: str, rows) -> str:
    """A small HTML table of (figure, value) rows: what a notebook shows for an estimate."""
    import html
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table><caption>{html.escape(title)}</caption><tbody>{body}</tbody></table>"


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return v.to_dict() if hasattr(v, "to_dict") else dataclasses.asdict(v)
    if hasattr(v, "to_list"):   # a lazily made table
        return v.to_list()
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


@dataclass(frozen=True)
class TrainingEstimate:
    """One training step of a model on a system with a parallel layout."""
    model: str
    instance: str
    nodes: int
    lnc: int
    cores: int
    parallel: Mapping[str, Any]
    precision: str
    seq: int
    global_batch: int
    micro_batch: int
    micro_batches: int
    recompute: str
    step_time_s: float
    seq_per_s: float
    tokens_per_s: float
    mfu: float
    hfu: float
    model_flops_per_step: float
    memory_per_core_gib: float
    memory: Mapping[str, float]
    breakdown: Mapping[str, float]          # seconds on the critical path of one step
    comm: Mapping[str, Mapping[str, float]]  # per collective: bytes, seconds, exposed, overlapped
    error_band: Mapping[str, float]         # relative, per figure
    calibration_rows: Tuple[str, ...]
    ops_by_how: Mapping[str, List[str]]
    sim_seconds: float
    notes: Tuple[str, ...] = ()
    # per collective kind over the step: calls, seconds and buffer bytes summed over the calls
    collectives: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # size x group table: each distinct (op, bytes per call, group) the step charged, calls, time, algorithm, links
    collective_table: Sequence[CollectiveGroup] = ()

    def _repr_html_(self) -> str:
        p = self.parallel
        return _html_figures(f"training {self.model} on {self.nodes} x {self.instance} (tp={p.get('tp')} "
                             f"pp={p.get('pp')} dp={p.get('dp')})",
                             [("step time", f"{self.step_time_s:.4g} s"), ("tokens/s", f"{self.tokens_per_s:,.0f}"),
                              ("MFU", f"{self.mfu:.1%}"), ("memory per rank", f"{self.memory_per_core_gib:.2f} GiB")]
                             + [(k, f"{v:.4g} s") for k, v in self.breakdown.items()])

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of every field."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ServingEstimate:
    """Continuous batching of a request mix on one replica (a small discrete-event simulation)."""
    rate_per_s: float
    requests: int
    max_batch: int
    output_tokens_per_s: float
    requests_per_s: float
    latency_s_p50: float
    latency_s_p90: float
    latency_s_p99: float
    ttft_ms_p50: float
    ttft_ms_p90: float
    ttft_ms_p99: float
    mean_batch: float
    mode: str = "open"                  # "open" (Poisson rate), "closed" (N users), "offline" (all at once)
    concurrency: int = 0
    tpot_ms_p50: float = 0.0            # per request: (last token - first token) / (output - 1)
    tpot_ms_p99: float = 0.0
    itl_ms_p50: float = 0.0             # time between streamed chunks (one target step; > TPOT with speculation)
    sustainable_rate_per_s: float = 0.0  # requests/s the replica sustains at full batch
    overloaded: bool = False
    verdict: str = ""
    scenario: str = ""                  # MLPerf-style "offline" / "server" when asked for
    scenario_limits: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of every field."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class InferenceEstimate:
    """Prefill (TTFT) and decode (TPOT) of a batch, memory per core, and optionally a served request mix."""
    model: str
    instance: str
    nodes: int
    lnc: int
    cores: int
    parallel: Mapping[str, Any]
    precision: str
    batch: int
    input_len: int
    output_len: int
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float
    memory_per_core_gib: float
    kv_cache_gib: float
    memory: Mapping[str, float]
    chips_needed: int
    breakdown: Mapping[str, float]
    error_band: Mapping[str, float]
    calibration_rows: Tuple[str, ...]
    ops_by_how: Mapping[str, List[str]]
    sim_seconds: float
    serving: Optional[ServingEstimate] = None
    notes: Tuple[str, ...] = field(default_factory=tuple)
    framework: Optional[Mapping[str, Any]] = None   # the serving framework's figures and the KV-cache format
    # per phase (prefill, decode), per collective kind: calls, seconds and buffer bytes summed over the calls
    collectives: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    # per phase (prefill, decode step): the size x group table of the collectives it charged
    collective_table: Mapping[str, Sequence[CollectiveGroup]] = field(default_factory=dict)

    def _repr_html_(self) -> str:
        return _html_figures(f"inference {self.model} on {self.instance} (tp={self.parallel.get('tp')}, batch "
                             f"{self.batch}, {self.input_len} in / {self.output_len} out)",
                             [("TTFT", f"{self.ttft_ms:.4g} ms"), ("TPOT", f"{self.tpot_ms:.4g} ms"),
                              ("output tokens/s", f"{self.output_tokens_per_s:,.1f}"),
                              ("memory per rank", f"{self.memory_per_core_gib:.2f} GiB")]
                             + [(k, f"{v:.4g}") for k, v in self.breakdown.items()])

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of every field."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
