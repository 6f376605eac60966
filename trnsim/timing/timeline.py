"""What the scheduler returns: per-instruction times in flat numpy arrays, DMA queue occupancy
grouped by placement, and the dependency graph in CSR form.

Kept as arrays rather than Python objects so a Timeline of a million instructions stays in the tens
of megabytes: a tuple per instruction, or per (instruction, DMA queue) part, would cost gigabytes.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from ..ir.engines import ENGINE_CODE, ENGINE_ORDER  # noqa: F401  (the engine table; code = position)

_ENGINE_NAMES = np.array(ENGINE_ORDER, dtype=object)

_ITER_CHUNK = 1 << 14  # groups converted to Python objects at a time when iterating


class DmaParts(Sequence):
    """``(instruction, queue, start_ns, end_ns)`` for every DMA queue an instruction used.

    Stored per placement group (the queues of one instruction that got the same interval), in the
    order the scheduler made them: ``ins``, ``start``, ``end`` per group, the queues of group ``g``
    in ``queue[off[g]:off[g + 1]]``.  ``queue_busy`` (per queue, summed in part order) is
    accumulated by the scheduler, so utilization needs no pass over the parts.
    """

    def __init__(self, ins, start, end, off, queue, queue_busy, queue_order: Sequence[int]):
        self.ins = np.asarray(ins, dtype=np.int32)
        self.start = np.asarray(start, dtype=np.float64)
        self.end = np.asarray(end, dtype=np.float64)
        self.off = np.asarray(off, dtype=np.int64)
        self.queue = np.asarray(queue)
        self.queue_busy = np.asarray(queue_busy, dtype=np.float64)
        self.queue_order = tuple(int(q) for q in queue_order)

    def __len__(self) -> int:
        return int(self.off[-1]) if len(self.off) else 0

    def __iter__(self) -> Iterator[Tuple[int, int, float, float]]:
        off, queue = self.off, self.queue
        for g0 in range(0, len(self.ins), _ITER_CHUNK):
            g1 = min(g0 + _ITER_CHUNK, len(self.ins))
            ins = self.ins[g0:g1].tolist()
            st = self.start[g0:g1].tolist()
            en = self.end[g0:g1].tolist()
            qs = queue[off[g0]:off[g1]].tolist()
            cuts = (off[g0:g1 + 1] - off[g0]).tolist()
            for k in range(g1 - g0):
                i, s, e = ins[k], st[k], en[k]
                for q in qs[cuts[k]:cuts[k + 1]]:
                    yield (i, q, s, e)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return list(itertools.islice(iter(self), *k.indices(len(self))))
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("DMA part index out of range")
        g = int(np.searchsorted(self.off, k, side="right")) - 1
        return (int(self.ins[g]), int(self.queue[k]), float(self.start[g]), float(self.end[g]))

    def queue_busy_ns(self) -> Dict[int, float]:
        """Busy time per queue, in the order queues first appear."""
        return {q: float(self.queue_busy[q]) for q in self.queue_order}

    def active_ns(self) -> float:
        """Time during which at least one queue moves data (union of the intervals)."""
        if len(self.start) == 0:
            return 0.0
        order = np.lexsort((self.end, self.start))
        s, e = self.start[order], self.end[order]
        reach = np.maximum.accumulate(e)
        new = np.empty(len(s), dtype=bool)
        new[0] = True
        new[1:] = s[1:] > reach[:-1]
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, len(s) - 1)
        # cumsum adds left to right, as a running Python sum over the merged spans would
        return float(np.cumsum(reach[last] - s[first])[-1])

    @classmethod
    def empty(cls, queues: int = 0) -> "DmaParts":
        """No DMA placements (``queues`` queues, all idle)."""
        return cls([], [], [0], np.zeros(0, np.uint8), np.zeros(queues), ())


class DepGraph(Sequence):
    """For each instruction, the earlier instructions it waits for (sorted), in CSR form."""

    def __init__(self, indptr, indices):
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        a, b = self.indptr[i], self.indptr[i + 1]
        return tuple(self.indices[a:b].tolist())

    def __iter__(self) -> Iterator[Tuple[int, ...]]:
        ind = self.indices.tolist()
        ptr = self.indptr.tolist()
        for i in range(len(ptr) - 1):
            yield tuple(ind[ptr[i]:ptr[i + 1]])

    def __eq__(self, other) -> bool:
        if isinstance(other, DepGraph):
            return np.array_equal(self.indptr, other.indptr) and \
                np.array_equal(self.indices, other.indices)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    @classmethod
    def from_lists(cls, deps: Iterable[Sequence[int]]) -> "DepGraph":
        """Convert the reference implementation's list of tuples."""
        if isinstance(deps, DepGraph):
            return deps
        deps = list(deps)
        lens = np.fromiter((len(d) for d in deps), dtype=np.int64, count=len(deps))
        indptr = np.zeros(len(deps) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        idx = np.fromiter(itertools.chain.from_iterable(deps), dtype=np.int64,
                          count=int(indptr[-1]))
        if idx.size and (idx.min() < 0 or idx.max() >= len(deps)):
            raise IndexError("dependency index out of range")
        return cls(indptr, idx.astype(np.int32))


@dataclass
class Timeline:
    """When every instruction ran (ns from kernel start) and where."""
    start: np.ndarray          # float64 per instruction
    end: np.ndarray            # results available (occupancy + latency)
    busy_end: np.ndarray       # engine released (start + occupancy)
    engine_code: np.ndarray    # uint8 index into ENGINE_ORDER
    dma_parts: DmaParts
    flops: float = 0.0
    pe_bf16_equiv: float = 0.0
    hbm_bytes: int = 0
    dma_bytes: int = 0
    throttled_ns: float = 0.0
    deps: Optional[Sequence[Tuple[int, ...]]] = None

    @property
    def engine(self) -> np.ndarray:
        """Engine name per instruction (an object array of ENGINE_ORDER's strings)."""
        return _ENGINE_NAMES[self.engine_code]

    @property
    def latency_ns(self) -> float:
        """When the last result is ready (0 for an empty trace)."""
        return float(self.end.max()) if len(self.end) else 0.0

    def engine_busy_ns(self) -> Dict[str, float]:
        """Summed occupancy per compute engine (in program order, as a running sum would)."""
        busy = {}
        occ = self.busy_end - self.start
        for code, e in enumerate(ENGINE_ORDER):
            if e == "dma":
                continue
            d = occ[self.engine_code == code]
            busy[e] = float(np.cumsum(d)[-1]) if len(d) else 0.0
        return busy

    def nbytes(self) -> int:
        """Memory held by the arrays (the dependency graph included when it is a DepGraph)."""
        arrs = [self.start, self.end, self.busy_end, self.engine_code, self.dma_parts.ins,
                self.dma_parts.start, self.dma_parts.end, self.dma_parts.off,
                self.dma_parts.queue, self.dma_parts.queue_busy]
        if isinstance(self.deps, DepGraph):
            arrs += [self.deps.indptr, self.deps.indices]
        return sum(a.nbytes for a in arrs)
