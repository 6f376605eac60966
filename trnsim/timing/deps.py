"""Data dependencies between instructions: read-after-write, write-after-read, write-after-write on
overlapping regions of the same allocation (what the hardware's semaphores enforce).  SBUF tiles
the compiler's allocator placed on shared bytes (``trace.meta['sbuf_placement']``,
nki/core/placement.py) are compared on those physical bytes, so a tile that reuses another's bytes
waits for its last reader; both backends apply the same map (``physical``; encode.py for C).

Entries are bucketed by byte range so a trace with thousands of disjoint tiles in one tensor stays
linear; reads by the same engine of the same rectangle collapse to the latest one (an engine
completes in order; not on the streams the scheduler reorders, reorder.py); writes drop entries
they fully cover (later accesses depend on the new write, which depends on them).

``dependencies`` runs the C implementation (native.py) when it is built; ``dependencies_py`` below
is the reference it must match.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..ir.trace import Region, Trace

from .regions import BUCKET_HBM, BUCKET_ONCHIP, physical, physical_map  # noqa: F401  (API)


class _Tensor:
    __slots__ = ("writes", "reads", "bucket")

    def __init__(self, bucket: int):
        self.writes: Dict[int, list] = {}
        self.reads: Dict[int, list] = {}
        self.bucket = bucket


def _buckets(b0: int, b1: int, size: int):
    return range(b0 // size, (max(b1, b0 + 1) - 1) // size + 1)


def dependencies(trace: Trace, backend: str = "auto",
                 reorder: Sequence[str] = ()) -> Sequence[Tuple[int, ...]]:
    """For each instruction, the indices of the earlier instructions it must wait for.

    ``backend``: 'auto' (native when built), 'native' or 'python'.  ``reorder``: engines whose
    streams the scheduler reorders (``CostModel.reorder_engines``).  The native result is a
    ``DepGraph`` (CSR arrays, each entry sorted); the Python one a list of tuples."""
    from . import native
    if native.resolve(backend):
        return native.dependencies(trace, reorder)
    return dependencies_py(trace, reorder)


def dependencies_py(trace: Trace, reorder: Sequence[str] = ()) -> List[Tuple[int, ...]]:
    """The reference implementation of ``dependencies`` (pure Python)."""
    tensors: Dict[tuple, _Tensor] = {}
    out: List[Tuple[int, ...]] = []
    append = out.append
    remap = physical_map(trace)
    for i, ins in enumerate(trace.instructions):
        preds = set()
        eng = collapse_engine(ins, reorder)
        # reads depend on overlapping writes
        for r in ins.reads:
            key, p0, p1, b0, b1 = physical(r, remap)
            tt = tensors.get(key)
            if tt is None:
                continue
            for bk in _buckets(b0, b1, tt.bucket):
                for e in tt.writes.get(bk, ()):
                    if e[5] and e[0] < p1 and p0 < e[1] and e[2] < b1 and b0 < e[3]:
                        preds.add(e[4])
        # writes depend on overlapping writes and reads
        for w in ins.writes:
            key, p0, p1, b0, b1 = physical(w, remap)
            tt = tensors.get(key)
            if tt is None:
                continue
            for bk in _buckets(b0, b1, tt.bucket):
                for e in tt.writes.get(bk, ()):
                    if e[5] and e[0] < p1 and p0 < e[1] and e[2] < b1 and b0 < e[3]:
                        preds.add(e[4])
                for e in tt.reads.get(bk, ()):
                    if e[5] and e[0] < p1 and p0 < e[1] and e[2] < b1 and b0 < e[3]:
                        preds.add(e[4])
        preds.discard(i)
        append(tuple(preds))
        # record this instruction's accesses
        for r in ins.reads:
            _add(tensors, physical(r, remap), i, eng, False)
        for w in ins.writes:
            _add(tensors, physical(w, remap), i, eng, True)
    return out


def collapse_engine(ins, reorder: Sequence[str] = ()) -> str:
    """The engine whose in-order completion lets a later read of the same rectangle stand for an
    earlier one: an instruction left to the compiler (``engine_auto``) may move, and one on a
    reordered stream (``reorder``) may finish after a later reader, so both are keyed like a DMA
    read, which never collapses."""
    return "dma" if ins.attr("engine_auto") or ins.engine in reorder else ins.engine


def _add(tensors, geo: tuple, i: int, eng: str, is_write: bool) -> None:
    key, p0, p1, b0, b1 = geo
    tt = tensors.get(key)
    if tt is None:
        tt = _Tensor(BUCKET_HBM if key[0] == "hbm" else BUCKET_ONCHIP)
        tensors[key] = tt
    entry = [p0, p1, b0, b1, i, True, eng]
    bks = _buckets(b0, b1, tt.bucket)
    if is_write:
        # entries fully covered by this write are no longer needed
        for bk in bks:
            for table in (tt.writes, tt.reads):
                lst = table.get(bk)
                if not lst:
                    continue
                keep = []
                for e in lst:
                    if e[5] and not (p0 <= e[0] and e[1] <= p1 and b0 <= e[2] and e[3] <= b1):
                        keep.append(e)
                    else:
                        e[5] = False
                table[bk] = keep
        for bk in bks:
            tt.writes.setdefault(bk, []).append(entry)
    else:
        for bk in bks:
            lst = tt.reads.setdefault(bk, [])
            # the same engine reading the same rectangle again: keep only the latest reader
            if lst:
                last = lst[-1]
                if last[5] and last[6] == eng and eng != "dma" and last[0] == p0 and \
                        last[1] == p1 and last[2] == b0 and last[3] == b1:
                    last[4] = i
                    continue
            lst.append(entry)
