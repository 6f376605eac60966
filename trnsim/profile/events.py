"""Plain timeline events from an Estimate: one track per engine and per DMA queue per core.

The scheduler records times; this module only turns them into (track, name, start, duration,
source) rows that the Perfetto, HTML and Parquet writers render (tinygrad keeps its viewer apart
the same way).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator, List

from ..ir.engines import COMPUTE_ENGINES, TRACK_NAME
from ..timing.estimate import Estimate

# profiler-style track names (cf. qPE / qAct / qPool / qDVE / qSP in Neuron Explorer) come from the
# engine table; the DMA queues get one track each instead of one "DMA" track
TRACK_ORDER = COMPUTE_ENGINES


@dataclass(frozen=True)
class Event:
    """One slice of the timeline: a track, the opcode, start, duration and source line."""
    track: str          # e.g. "NC0:PE", "NC0:DMA:q3"
    name: str           # opcode
    start_ns: float
    dur_ns: float
    index: int          # instruction index in its core's trace
    source: str         # "file:line"
    detail: str


def tracks(est: Estimate) -> List[str]:
    """Track names in display order: per core its compute engines, then its DMA queues."""
    out = []
    for c in est.cores:
        nc = f"NC{c.core}"
        out += [f"{nc}:{TRACK_NAME[e]}" for e in TRACK_ORDER]
        out += [f"{nc}:DMA:q{q}" for q in range(c.spec.dma_engines)]
    return out


def _src(ins) -> str:
    s = ins.source
    return f"{s.file.rsplit('/', 1)[-1]}:{s.line}"


def _detail(ins) -> str:
    parts = []
    for r in ins.reads:
        parts.append(f"rd {r.memory}:{r.name}[p{r.partition}+{r.partitions}, b{r.start}:{r.stop}]")
    for w in ins.writes:
        parts.append(f"wr {w.memory}:{w.name}[p{w.partition}+{w.partitions}, b{w.start}:{w.stop}]")
    attrs = ", ".join(f"{k}={v}" for k, v in ins.attrs)
    parts.append(f"{ins.partitions}x{ins.free} {ins.dtype_in}->{ins.dtype_out}")
    if attrs:
        parts.append(attrs)
    return "; ".join(parts)


def events(est: Estimate, details: bool = True, limit: int = 0) -> Iterator[Event]:
    """Every slice of every core; with ``limit``, only those of each core's first ``limit``
    instructions."""
    for c in est.cores:
        nc = f"NC{c.core}"
        tl = c.timeline
        instrs = c.trace.instructions
        n = len(instrs) if not limit else min(limit, len(instrs))
        start, busy_end = tl.start[:n].tolist(), tl.busy_end[:n].tolist()  # plain floats
        for i, ins in enumerate(itertools.islice(instrs, n)):
            if ins.engine == "dma":
                continue
            yield Event(f"{nc}:{TRACK_NAME.get(ins.engine, ins.engine)}", ins.opcode, start[i],
                        busy_end[i] - start[i], i, _src(ins), _detail(ins) if details else "")
        last, ins, src, det = -1, None, "", ""
        for i, q, s, e in tl.dma_parts:
            if i >= n:  # parts come in program order
                break
            if i != last:  # the parts of one transfer are adjacent: look it up once
                last, ins = i, instrs[i]
                src, det = _src(ins), _detail(ins) if details else ""
            yield Event(f"{nc}:DMA:q{q}", ins.opcode, s, e - s, i, src, det)
