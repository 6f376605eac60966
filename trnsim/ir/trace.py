"""The instruction trace: the seam between functional execution (what) and timing (when).

Every ISA-level operation appends one ``Instruction``: its engine, opcode, the memory regions it
reads and writes, the shape of the work, dtypes and the kernel source line.  The trace is plain
frozen data; it never holds tensor values, so it can be saved, loaded and re-timed for another
generation without running numpy again.
"""
from __future__ import annotations

import bisect
import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ..source import SourceLoc
from . import loops
from .engines import ENGINES  # noqa: F401  (re-exported from the one engine table)


class Region(NamedTuple):
    """A rectangle of one memory touched by an instruction.

    On-chip (sbuf/psum): partitions ``[partition, partition + partitions)`` and bytes
    ``[start, stop)`` within each partition.  HBM: rows ``[partition, partition + partitions)``
    of the tensor (a row is its last dimension, ``Storage.hbm_pitch`` bytes) and bytes
    ``[start, stop)`` within each row; an allocation without a pitch is one row.
    ``tensor`` identifies the allocation (an id shared by every view of it).  ``contiguous`` is the
    byte length of the innermost contiguous run, the figure DMA efficiency depends on.
    (A NamedTuple: immutable plain data, built at C speed on the simulator's hot path.)
    """
    memory: str
    tensor: int
    name: str
    partition: int
    partitions: int
    start: int
    stop: int
    elements: int
    dtype: str
    contiguous: int
    indirect: bool = False

    @property
    def bytes(self) -> int:
        """Bytes of the rectangle (an upper bound on those touched: strides may skip some)."""
        return (self.stop - self.start) * self.partitions

    def overlaps(self, other: "Region") -> bool:
        """Same allocation and intersecting rectangles (the dependency / race test)."""
        if self.tensor != other.tensor:
            return False
        if self.partition + self.partitions <= other.partition or \
                other.partition + other.partitions <= self.partition:
            return False
        return self.start < other.stop and other.start < self.stop


class Instruction(NamedTuple):
    """One ISA-level operation on one NeuronCore."""
    index: int
    engine: str
    opcode: str
    reads: Tuple[Region, ...]
    writes: Tuple[Region, ...]
    partitions: int
    free: int
    dtype_in: str
    dtype_out: str
    attrs: Tuple[Tuple[str, Any], ...]
    source: SourceLoc
    core: int = 0

    def attr(self, key: str, default: Any = None) -> Any:
        """The value of attribute ``key`` (``default`` when absent)."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def elements(self) -> int:
        """Elements of the work: partitions x free size."""
        return self.partitions * self.free


# Tensor ids of the tiles of synthesized loop iterations (fastforward.py): negative, so they never
# collide with storage ids; reserved in contiguous runs under a lock (LNC cores trace in threads).
_synth_lock = threading.Lock()
_synth_next = [1]


def reserve_synthetic_ids(n: int) -> int:
    """Reserve ``n`` synthetic tensor ids; returns the first (ids are ``-(first + k)``)."""
    with _synth_lock:
        first = _synth_next[0]
        _synth_next[0] += max(n, 0)
    return first


def peek_synthetic_id() -> int:
    """The next synthetic id ``reserve_synthetic_ids`` would hand out (nothing is reserved)."""
    return _synth_next[0]


class LoopBlock:
    """Iterations of a loop body that were not executed but synthesized from recorded ones.

    Iteration ``k`` (counted from the loop's first iteration) of slot ``j`` is the ``template``
    instruction ``j`` (recorded at ``k = 0``) with every region's partition, start and stop moved by
    ``k`` times that region's per-iteration delta, and each tile allocated inside the body replaced
    by a fresh synthetic id (the body allocates the same tiles every iteration).  Kept compact so a
    loop of a million iterations costs a few arrays, not a million records; ``materialize`` builds
    the records on demand.
    """
    __slots__ = ("template", "k0", "count", "deltas", "nlocal", "synth_first", "n", "_plans",
                 "_packed")

    def __init__(self, template: Sequence["Instruction"], k0: int, count: int,
                 deltas: Sequence[Tuple[Tuple[int, int, int, int], ...]], nlocal: int):
        self.template = tuple(template)
        self.k0 = k0              # iteration number of the first synthesized iteration
        self.count = count        # iterations synthesized
        # per template instruction, per region (reads then writes): (dpartition, dstart, dstop,
        # local rank or -1 for a tensor shared by all iterations)
        self.deltas = tuple(deltas)
        self.nlocal = nlocal
        self.synth_first = reserve_synthetic_ids(nlocal * count) if nlocal else 0
        self.n = len(self.template) * count
        self._plans: Optional[list] = None  # per template instruction (loops.records_py)
        self._packed = None  # loops.pack's figures, False for the Python reference

    def local_id(self, c: int, rank: int) -> int:
        """Synthetic tensor id of body-local tile ``rank`` in synthesized iteration ``c``."""
        return -(self.synth_first + c * self.nlocal + rank)

    def materialize(self, first_index: int, lo: int = 0, hi: Optional[int] = None
                    ) -> Iterator["Instruction"]:
        """Records ``lo .. hi`` of the block (block-relative), indexed from ``first_index``."""
        hi = self.n if hi is None else hi
        if self._packed is None:  # the C kernels (loops.py) unless off or declined
            self._packed = loops.pack(self.template, self.deltas)
        if self._packed and lo < hi:
            return loops.records(self, self._packed, first_index, lo, hi, Region, Instruction)
        return loops.records_py(self, first_index, lo, hi, Region, Instruction)

    def record(self, index: int, pos: int) -> "Instruction":
        """Record ``pos`` of the block (block-relative), indexed ``index``."""
        return next(self.materialize(index - pos, pos, pos + 1))


class InstructionList(Sequence):
    """A trace's instructions in program order: recorded ``Instruction``s, and ``LoopBlock``s of
    synthesized iterations that are materialized when read.  Appending and ``len`` stay O(1)."""
    __slots__ = ("_segs", "_starts", "_n", "_tail")

    def __init__(self, items: Iterable["Instruction"] = ()):
        self._tail: list = list(items)
        self._segs: list = [self._tail]
        self._starts: List[int] = [0]
        self._n = len(self._tail)

    def __len__(self) -> int:
        return self._n

    def plain_list(self) -> Optional[list]:
        """The underlying list when every instruction is a recorded one (no synthesized loop
        blocks), so hot paths can index it directly; None otherwise."""
        return self._tail if len(self._segs) == 1 else None

    def append(self, ins: "Instruction") -> None:
        """Append a recorded instruction (O(1))."""
        self._tail.append(ins)
        self._n += 1

    def _seg_of(self, i: int) -> int:
        return bisect.bisect_right(self._starts, i) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._n)
            if step != 1:
                return [self[j] for j in range(lo, hi, step)]
            return list(self.iter_range(lo, hi))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("instruction index out of range")
        if len(self._segs) == 1:
            return self._tail[i]
        s = self._seg_of(i)
        seg = self._segs[s]
        off = i - self._starts[s]
        if isinstance(seg, list):
            return seg[off]
        return seg.record(i, off)

    def __setitem__(self, i: int, ins: "Instruction") -> None:
        if i < 0:
            i += self._n
        s = self._seg_of(i) if len(self._segs) > 1 else 0
        seg = self._segs[s]
        if not isinstance(seg, list):
            raise IndexError("synthesized loop iterations cannot be changed")
        seg[i - self._starts[s]] = ins

    def __iter__(self) -> Iterator["Instruction"]:
        for s, seg in enumerate(self._segs):
            if isinstance(seg, list):
                yield from seg
            else:
                yield from seg.materialize(self._starts[s])

    def iter_range(self, lo: int, hi: int) -> Iterator["Instruction"]:
        """Instructions ``lo .. hi`` in order, materializing only the loop iterations in range."""
        if lo >= hi:
            return
        s = self._seg_of(lo)
        while s < len(self._segs) and self._starts[s] < hi:
            seg, base = self._segs[s], self._starts[s]
            a, b = max(lo, base) - base, min(hi, base + _seg_len(seg)) - base
            if isinstance(seg, list):
                yield from seg[a:b]
            else:
                yield from seg.materialize(base, a, b)
            s += 1

    def segments(self) -> Iterator[Tuple[int, Any]]:
        """``(first index, list of Instruction | LoopBlock)`` in order (for vectorized encoders)."""
        return zip(self._starts, self._segs)

    @property
    def blocks(self) -> List[LoopBlock]:
        """The synthesized loop blocks, in program order."""
        return [s for s in self._segs if not isinstance(s, list)]

    # -- restructuring (fastforward.py) ------------------------------------------------------
    def _cut(self, i: int) -> int:
        """Make ``i`` a segment boundary; returns the segment number starting at ``i``."""
        if i == self._n:
            if self._segs and _seg_len(self._segs[-1]) == 0:
                return len(self._segs) - 1
            self._segs.append([])
            self._starts.append(self._n)
            self._tail = self._segs[-1]
            return len(self._segs) - 1
        s = self._seg_of(i)
        base = self._starts[s]
        if base == i:
            return s
        seg = self._segs[s]
        if not isinstance(seg, list):
            raise ValueError("cannot split a synthesized block")
        off = i - base
        self._segs[s:s + 1] = [seg[:off], seg[off:]]
        self._starts.insert(s + 1, i)
        return s + 1

    def _renumber(self, first: int = 0) -> None:
        """Recompute segment starts and record indices from segment ``first`` on (the ones
        before it are unchanged: a block inserted at segment ``first`` moves only what follows),
        dropping empty segments but the last."""
        old = self._segs
        last = old[-1]
        segs, starts = old[:first], self._starts[:first]
        pos = starts[-1] + _seg_len(segs[-1]) if segs else 0
        for seg in old[first:]:
            n = _seg_len(seg)
            if not n and seg is not last:
                continue
            starts.append(pos)
            segs.append(seg)
            if isinstance(seg, list):
                for k, ins in enumerate(seg):
                    if ins.index != pos + k:
                        seg[k] = _with_fields(ins, ((0, pos + k),))
            pos += n
        if not isinstance(segs[-1], list):
            segs.append([])
            starts.append(pos)
        self._segs, self._starts, self._n = segs, starts, pos
        self._tail = segs[-1]

    def insert_block(self, pos: int, block: LoopBlock) -> None:
        """Insert ``block`` before index ``pos`` (later records are renumbered)."""
        s = self._cut(pos)
        self._segs.insert(s, block)
        self._starts.insert(s, pos)
        self._renumber(s)

    def insert_many(self, items: Sequence[Tuple[int, "Instruction"]]) -> None:
        """Insert instructions, each before the record at its position (positions in the current
        numbering, ascending); everything is renumbered.  Only for traces without blocks."""
        if not items:
            return
        if self.blocks:
            raise ValueError("cannot insert into a trace with synthesized loop iterations")
        old = list(self)
        out: list = []
        j = 0
        for pos, ins in items:
            out.extend(old[j:pos])
            j = max(j, pos)
            out.append(ins)
        out.extend(old[j:])
        out = [ins if ins.index == k else ins._replace(index=k) for k, ins in enumerate(out)]
        self._tail = out
        self._segs = [out]
        self._starts = [0]
        self._n = len(out)

    def move_to_end(self, lo: int, hi: int) -> None:
        """Move records ``[lo, hi)`` after everything recorded since (restores program order when
        a loop's last iteration ran before its middle ones)."""
        a = self._cut(lo)
        b = self._cut(hi)
        moved = self._segs[a:b]
        del self._segs[a:b]
        del self._starts[a:b]
        self._segs.extend(moved)
        self._starts.extend([0] * len(moved))
        self._renumber(a)  # the segments before the moved ones keep their places


def _seg_len(seg) -> int:
    return len(seg) if isinstance(seg, list) else seg.n


_FIELD = {f: i for i, f in enumerate(Instruction._fields)}


def _with_fields(ins, changes) -> "Instruction":
    """``ins`` with fields replaced (``(position, value)`` pairs): ``_replace`` without its
    keyword machinery for Instructions (the hot path of patching and renumbering records)."""
    if type(ins) is not Instruction:
        return ins._replace(**{Instruction._fields[i]: v for i, v in changes})
    vals = list(ins)
    for i, v in changes:
        vals[i] = v
    out = tuple.__new__(Instruction, vals)
    loops.untrack(out)  # no cycles in a record (see KernelContext.record)
    return out


@dataclass
class Trace:
    """The ordered instructions of one kernel run, per logical core."""
    target: str
    instructions: InstructionList = field(default_factory=InstructionList)
    meta: Dict[str, Any] = field(default_factory=dict)
    _regions: Dict[tuple, Region] = field(default_factory=dict, repr=False)
    # id -> the interned Region object itself (kept alive by _regions, so ids stay unique): most
    # regions come back as the same cached object, found without hashing its 11 fields
    _interned_ids: Dict[int, Region] = field(default_factory=dict, repr=False)
    # index remappings made while the kernel ran (fastforward.py), oldest first: lists of
    # (lo, hi, delta) windows, so an index held since before a remapping can be resolved
    _remaps: List[List[Tuple[int, int, int]]] = field(default_factory=list, repr=False)
    # per remapping, the trace's length when it was made: no window of it reaches that far, and
    # the trace never shrinks, so these are sorted and ``resolve`` skips by bisection
    _remap_ends: List[int] = field(default_factory=list, repr=False)

    def __post_init__(self):
        if not isinstance(self.instructions, InstructionList):
            self.instructions = InstructionList(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __getitem__(self, i):
        return self.instructions[i]

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_interned_ids"] = {}  # ids mean nothing in another process or copy
        return state

    def intern(self, r: Region) -> Region:
        """Share identical regions between instructions (keeps 1M-instruction traces small)."""
        got = self._interned_ids.get(id(r))
        if got is not None:
            return got
        got = self._regions.get(r)
        if got is None:
            self._regions[r] = r
            got = r
        if got is r:
            self._interned_ids[id(r)] = r
        return got

    def append(self, ins: Instruction) -> int:
        """Append ``ins``; returns its index."""
        self.instructions.append(ins)
        return len(self.instructions) - 1

    def patch(self, i: int, **changes) -> None:
        """Replace fields of instruction ``i`` (used when a result is written straight into its
        destination, e.g. ``x[...] = nisa.activation(...)``)."""
        bad = [k for k in changes if k not in _FIELD]
        if bad:
            raise ValueError(f"Got unexpected field names: {bad!r}")
        self.instructions[i] = _with_fields(self.instructions[i],
                                            [(_FIELD[k], v) for k, v in changes.items()])

    def add_remap(self, windows: List[Tuple[int, int, int]]) -> None:
        """Record an index remapping (``(lo, hi, delta)`` windows within the current length)."""
        self._remaps.append(windows)
        self._remap_ends.append(len(self.instructions))

    def resolve(self, i: int, since: int = 0) -> int:
        """The current index of the instruction that had index ``i`` when remapping ``since``
        had not happened yet (``i`` held by a tile across a fast-forwarded loop)."""
        remaps, ends = self._remaps, self._remap_ends
        n = len(remaps)
        if len(ends) != n:  # remappings appended without their lengths: look at every one
            ends = [1 << 62] * n
        e = since
        while e < n:
            # a remapping made when the trace ended at or before i has no window holding it
            e = bisect.bisect_right(ends, i, e)
            if e >= n:
                break
            for lo, hi, d in remaps[e]:
                if lo <= i < hi:
                    i += d
                    break
            e += 1
        return i

    def remap_epoch(self) -> int:
        """How many index remappings have happened (the ``since`` to pass to ``resolve`` later)."""
        return len(self._remaps)

    def by_engine(self) -> Dict[str, List[Instruction]]:
        """The instructions grouped by engine, each list in program order."""
        out: Dict[str, List[Instruction]] = {}
        for ins in self.instructions:
            out.setdefault(ins.engine, []).append(ins)
        return out

    def counts(self) -> Dict[str, int]:
        """Instructions per opcode."""
        out: Dict[str, int] = {}
        for ins in self.instructions:
            out[ins.opcode] = out.get(ins.opcode, 0) + 1
        return out

    # -- persistence -------------------------------------------------------------------------
    def to_json(self) -> str:
        """The trace as JSON (format ``trnsim-trace/1``; regions stored once, referenced by id)."""
        regions: Dict[Region, int] = {}
        rows = []

        def rid(r: Region) -> int:
            if r not in regions:
                regions[r] = len(regions)
            return regions[r]

        for ins in self.instructions:
            rows.append([ins.index, ins.engine, ins.opcode, [rid(r) for r in ins.reads],
                         [rid(r) for r in ins.writes], ins.partitions, ins.free, ins.dtype_in,
                         ins.dtype_out, [list(a) for a in ins.attrs], list(ins.source), ins.core])
        return json.dumps({"format": "trnsim-trace/1", "target": self.target, "meta": self.meta,
                           "regions": [r._asdict() for r in regions],
                           "instructions": rows}, default=str)

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        """Load a trace written by ``to_json``; another format raises ConfigError."""
        d = json.loads(text)
        if d.get("format") != "trnsim-trace/1":
            from ..errors import ConfigError
            raise ConfigError("not a trnsim trace file", rule="trace-format", value=d.get("format"))
        regions = [Region(**r) for r in d["regions"]]
        t = cls(target=d["target"], meta=d.get("meta", {}))
        for row in d["instructions"]:
            (idx, eng, op, rd, wr, parts, free, din, dout, attrs, src, core) = row
            t.instructions.append(Instruction(idx, eng, op, tuple(regions[i] for i in rd),
                                              tuple(regions[i] for i in wr), parts, free, din, dout,
                                              tuple((k, v) for k, v in attrs), SourceLoc(*src), core))
        return t
