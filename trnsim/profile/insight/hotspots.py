"""Hotspots: engine time, instruction count and engines per kernel source line and per opcode."""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from .table import CODE_LABEL, InstrTable, code_line, short


def durations(tl) -> np.ndarray:
    """Engine time per instruction: occupancy on a compute engine, the transfer on DMA queues."""
    return tl.busy_end - tl.start


def by_line(tab: InstrTable, tl, top: int) -> List[dict]:
    """The ``top`` source lines by summed engine time (share: of all instructions' time)."""
    dur = durations(tl)
    ns = len(tab.sources)
    t = np.bincount(tab.src, weights=dur, minlength=ns)
    cnt = np.bincount(tab.src, minlength=ns)
    ne = len(CODE_LABEL)
    per_eng = np.bincount(tab.src.astype(np.int64) * ne + tl.engine_code, minlength=ns * ne)
    per_eng = per_eng.reshape(ns, ne)
    total = float(dur.sum()) or 1.0
    # source ids follow object identity (run to run they differ): ties break on program order,
    # the first instruction of each line, so equal lines always list the same way
    first = np.full(ns, len(tab.src), np.int64)
    np.minimum.at(first, tab.src, np.arange(len(tab.src), dtype=np.int64))
    order = np.lexsort((first, -cnt, -t))[:top]   # most time first; ties: most instructions
    out = []
    for k in order.tolist():
        loc = tab.sources[k]
        engines: Dict[str, int] = {CODE_LABEL[e]: int(per_eng[k, e]) for e in range(ne)
                                   if per_eng[k, e]}
        out.append({"source": short(loc), "code": code_line(loc), "time_ns": float(t[k]),
                    "share": float(t[k]) / total, "instructions": int(cnt[k]), "engines": engines})
    return out


def by_opcode(tab: InstrTable, tl, top: int) -> List[dict]:
    """The ``top`` (opcode, engine) pairs by summed engine time."""
    dur = durations(tl)
    ne = len(CODE_LABEL)
    key = tab.op.astype(np.int64) * ne + tl.engine_code
    nk = len(tab.opcodes) * ne
    t = np.bincount(key, weights=dur, minlength=nk)
    cnt = np.bincount(key, minlength=nk)
    total = float(dur.sum()) or 1.0
    used = np.flatnonzero(cnt)
    names = np.array([tab.opcodes[k // ne] for k in used.tolist()], dtype=object)
    rank = np.argsort(np.argsort(names, kind="stable"), kind="stable")   # ties: by opcode name
    order = used[np.lexsort((used % ne, rank, -cnt[used], -t[used]))][:top]
    return [{"opcode": tab.opcodes[k // ne], "engine": CODE_LABEL[k % ne], "time_ns": float(t[k]),
             "share": float(t[k]) / total, "instructions": int(cnt[k])} for k in order.tolist()]
