"""The instruction trace: the seam between functional execution (what) and timing (when).

Every ISA-level operation appends one ``Instruction``: its engine, opcode, the memory regions it
reads and writes, the shape of the work, dtypes and the kernel source line.  The trace is plain
frozen data; it never holds tensor values, so it can be saved, loaded and re-timed for another
generation without running numpy again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ...source import SourceLoc

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync", "dma")


class Region(NamedTuple):
    """A rectangle of one memory touched by an instruction.

    On-chip (sbuf/psum): partitions ``[partition, partition + partitions)`` and bytes
    ``[start, stop)`` within each partition.  HBM: bytes ``[start, stop)`` of the tensor.
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
        per = self.stop - self.start
        return per * self.partitions if self.memory != "hbm" else per

    def overlaps(self, other: "Region") -> bool:
        """Same allocation and intersecting rectangles (the dependency / race test)."""
        if self.tensor != other.tensor:
            return False
        if self.memory != "hbm":
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
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def elements(self) -> int:
        return self.partitions * self.free


@dataclass
class Trace:
    """The ordered instructions of one kernel run, per logical core."""
    target: str
    instructions: List[Instruction] = field(default_factory=list)
    meta: Dict[str, Any] = field(default_factory=dict)
    _regions: Dict[tuple, Region] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __getitem__(self, i):
        return self.instructions[i]

    def intern(self, r: Region) -> Region:
        """Share identical regions between instructions (keeps 1M-instruction traces small)."""
        got = self._regions.get(r)
        if got is None:
            self._regions[r] = r
            got = r
        return got

    def append(self, ins: Instruction) -> int:
        self.instructions.append(ins)
        return len(self.instructions) - 1

    def patch(self, i: int, **changes) -> None:
        """Replace fields of instruction ``i`` (used when a result is written straight into its
        destination, e.g. ``x[...] = nisa.activation(...)``)."""
        self.instructions[i] = self.instructions[i]._replace(**changes)

    def by_engine(self) -> Dict[str, List[Instruction]]:
        out: Dict[str, List[Instruction]] = {}
        for ins in self.instructions:
            out.setdefault(ins.engine, []).append(ins)
        return out

    def counts(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for ins in self.instructions:
            out[ins.opcode] = out.get(ins.opcode, 0) + 1
        return out

    # -- persistence -------------------------------------------------------------------------
    def to_json(self) -> str:
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
        d = json.loads(text)
        if d.get("format") != "trnsim-trace/1":
            from ...errors import ConfigError
            raise ConfigError("not a trnsim trace file", rule="trace-format", value=d.get("format"))
        regions = [Region(**r) for r in d["regions"]]
        t = cls(target=d["target"], meta=d.get("meta", {}))
        for row in d["instructions"]:
            (idx, eng, op, rd, wr, parts, free, din, dout, attrs, src, core) = row
            t.instructions.append(Instruction(idx, eng, op, tuple(regions[i] for i in rd),
                                              tuple(regions[i] for i in wr), parts, free, din, dout,
                                              tuple((k, v) for k, v in attrs), SourceLoc(*src), core))
        return t
