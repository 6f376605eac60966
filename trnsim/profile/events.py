"""Plain timeline events from an Estimate: one track per engine and per DMA queue per core.

The scheduler records times; this module only turns them into (track, name, start, duration,
source) rows that the Perfetto, HTML and Parquet writers render (tinygrad keeps its viewer apart
the same way).
"""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

import numpy as np

from ..errors import TrnsimError
from ..ir.engines import COMPUTE_ENGINES, DISPLAY, ENGINE_CODE, LABEL, TRACK_NAME
from ..timing.estimate import Estimate

# profiler-style track names (cf. qPE / qAct / qPool / qDVE / qSP in Neuron Explorer) come from the
# engine table; the DMA queues get one track each instead of one "DMA" track
TRACK_ORDER = COMPUTE_ENGINES
_DMA_CODE = ENGINE_CODE["dma"]


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


# ---- names shown to people: the engine table's display labels ------------------------------------
_BY_TRACK = {TRACK_NAME[e]: e for e in TRACK_NAME}
_BY_LABEL = {LABEL[e]: e for e in LABEL}


def engine_display(name: str) -> str:
    """"Tensor (PE)" for an engine's canonical name, label or track ("tensor", "Tensor", "PE");
    DMA queues read "DMA q3"; anything else is returned as given (e.g. "start-up")."""
    if name.startswith("DMA:q"):
        return "DMA " + name[4:]
    e = name if name in DISPLAY else _BY_TRACK.get(name) or _BY_LABEL.get(name)
    return DISPLAY[e] if e else name


def track_display(track: str) -> str:
    """The label of an ``events`` track without its core: "NC0:PE" -> "Tensor (PE)",
    "NC0:DMA:q3" -> "DMA q3"."""
    return engine_display(track.split(":", 1)[1])


# ---- DMA transfer figures: what a DMA slice carries ------------------------------------------------
DMA_ARG_KEYS = ("bytes", "contiguous_bytes_per_partition", "efficiency", "queue")


def dma_columns(est: Estimate, core: int, analysis: Optional[dict] = None) -> Dict[str, np.ndarray]:
    """Per DMA instruction of core ``core`` (sorted by instruction): ``ins``, ``bytes``,
    ``contiguous`` (bytes per partition of the innermost run) and ``efficiency``.  Taken from the
    analysis's ``dma.transfers`` where it lists the instruction, else from the timing model's own
    DMA cost rule (the analysis lists only the top transfers).  A synthesized loop iteration moves
    what its recorded template does, so the rule runs once per template, not per iteration."""
    c = est.cores[core]
    tl = c.timeline
    ins = np.flatnonzero(tl.engine_code == _DMA_CODE)
    nbytes = np.zeros(len(c.trace), np.int64)
    contig = np.zeros(len(c.trace), np.int64)
    eff = np.zeros(len(c.trace), np.float64)
    model = est.model   # the rules that timed the run (hardware file, engine policy, stream order)

    def cost(instruction):
        try:
            d = model.dma(instruction)
        except (TrnsimError, KeyError, IndexError, ValueError):  # e.g. a collective without links
            return 0, 0, 0.0
        return d.bytes, int(d.chunk_bytes), d.efficiency
    for base, seg in _segments(c.trace):
        if isinstance(seg, list):
            for k, x in enumerate(seg):
                if x.engine == "dma":
                    nbytes[base + k], contig[base + k], eff[base + k] = cost(x)
            continue
        L = len(seg.template)
        for j, x in enumerate(seg.template):
            if x.engine == "dma":
                sl = slice(base + j, base + seg.n, L)
                nbytes[sl], contig[sl], eff[sl] = cost(x)
    if analysis and analysis.get("core", core) == core:
        for t in analysis.get("dma", {}).get("transfers", ()):
            i = int(t["instruction"])
            nbytes[i], contig[i], eff[i] = (t["bytes"], t["contiguous_bytes_per_partition"],
                                            t["efficiency"])
    return {"ins": ins, "bytes": nbytes[ins], "contiguous": contig[ins], "efficiency": eff[ins]}


def _segments(trace):
    """``(first index, list of Instruction | LoopBlock)`` of a trace (one list when it has no
    synthesized loop blocks), so per-template figures need no materialized iterations."""
    segs = getattr(trace.instructions, "segments", None)
    return segs() if segs is not None else [(0, list(trace.instructions))]


def instruction_columns(trace):
    """Per instruction its opcode and "file:line" as indices into two tables:
    ``(opcode index, source index, opcodes, sources)``, read per loop template."""
    names: Dict[str, int] = {}
    srcs: Dict[str, int] = {}
    cache: Dict[object, int] = {}
    op = np.zeros(len(trace), np.int64)
    sc = np.zeros(len(trace), np.int64)

    def src(x) -> int:
        k = cache.get(x.source)
        if k is None:
            k = cache[x.source] = srcs.setdefault(_src(x), len(srcs))
        return k
    for base, seg in _segments(trace):
        body = seg if isinstance(seg, list) else seg.template
        o = np.fromiter((names.setdefault(x.opcode, len(names)) for x in body), np.int64, len(body))
        s = np.fromiter((src(x) for x in body), np.int64, len(body))
        reps = 1 if isinstance(seg, list) else seg.count
        op[base:base + len(body) * reps] = np.tile(o, reps)
        sc[base:base + len(body) * reps] = np.tile(s, reps)
    return op, sc, list(names), list(srcs)


def dma_args(cols: Dict[str, np.ndarray], k: int, queue: int) -> Dict[str, object]:
    """The DMA fields of one queue slice (``k``: the transfer's row in ``dma_columns``)."""
    return {"bytes": int(cols["bytes"][k]),
            "contiguous_bytes_per_partition": int(cols["contiguous"][k]),
            "efficiency": round(float(cols["efficiency"][k]), 4), "queue": int(queue)}


def analyses(est: Estimate, analysis=None) -> Dict[int, dict]:
    """The analysis dicts by core: ``analysis`` may be one ``insight.analyze`` dict, a list of
    them, False (none) or None (computed here when the insight module is installed)."""
    if analysis is False:
        return {}
    if analysis is None:
        try:
            from .insight import analyze
        except ImportError:  # the analysis layer is optional for the renderers
            return {}
        try:
            analysis = analyze(est)
        except Exception as e:  # noqa: BLE001 -- the timeline is still worth writing without it
            warnings.warn(f"trnsim: the profile's explanation failed ({type(e).__name__}: {e}); "
                          "writing the timeline without it", RuntimeWarning, stacklevel=3)
            return {}
    if isinstance(analysis, dict):
        analysis = [analysis]
    return {int(a.get("core", 0)): a for a in analysis if a}
