"""Per-instruction arrays of one core's trace (source line id, opcode id) built without
materializing synthesized loop iterations: a 400k-instruction trace stays a few numpy arrays."""
from __future__ import annotations

import linecache
import operator
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from ...ir.engines import ENGINE_TABLE
from ...ir.trace import Instruction, Trace

# timing code -> display label ("Tensor", "Vector", ...), the engine table's labels
CODE_LABEL: Tuple[str, ...] = tuple(e.label for e in ENGINE_TABLE)
DMA_CODE = next(e.code for e in ENGINE_TABLE if e.name == "dma")


@dataclass(frozen=True)
class InstrTable:
    """Source-line and opcode ids per instruction, with the id -> value lists."""
    src: np.ndarray                    # int32 per instruction: index into ``sources``
    op: np.ndarray                     # int32 per instruction: index into ``opcodes``
    sources: List[Tuple[str, int]]     # (file, line)
    opcodes: List[str]

    def source_str(self, i: int) -> str:
        """"file.py:12" of instruction ``i``."""
        return self.names[int(self.src[i])]

    @property
    def names(self) -> List[str]:
        """"file.py:12" per source id (made once)."""
        got = self.__dict__.get("_names")
        if got is None:
            got = [short(loc) for loc in self.sources]
            object.__setattr__(self, "_names", got)
        return got

    def opcode(self, i: int) -> str:
        """Opcode of instruction ``i``."""
        return self.opcodes[int(self.op[i])]


def short(loc: Tuple[str, int]) -> str:
    """"file.py:12": the file's base name and the line."""
    return f"{os.path.basename(loc[0])}:{loc[1]}"


def code_line(loc: Tuple[str, int]) -> str:
    """The stripped source text of a (file, line), '' when the file cannot be read."""
    try:
        return linecache.getline(loc[0], loc[1]).strip()
    except (OSError, UnicodeDecodeError):  # a generated or binary "file"
        return ""


def build(trace: Trace) -> InstrTable:
    """The arrays of ``trace``: recorded instructions mapped by object identity (source locations
    are interned, opcodes are shared strings), loop blocks tiled from their template."""
    sid: Dict[Tuple[str, int], int] = {}
    oid: Dict[str, int] = {}
    n = len(trace)
    src = np.empty(n, dtype=np.int32)
    op = np.empty(n, dtype=np.int32)

    def ids(items, key, table) -> np.ndarray:
        objs = list(map(key, items))
        if not objs:
            return np.zeros(0, np.int32)
        u, first, inv = np.unique(np.fromiter(map(id, objs), np.int64, len(objs)),
                                  return_index=True, return_inverse=True)
        glob = np.empty(len(u), np.int32)
        for k, j in enumerate(first.tolist()):
            o = objs[j]
            name = (o[0], o[1]) if table is sid else o
            g = table.get(name)
            if g is None:
                g = table[name] = len(table)
            glob[k] = g
        return glob[inv.reshape(-1)]

    source = operator.itemgetter(Instruction._fields.index("source"))
    opcode = operator.itemgetter(Instruction._fields.index("opcode"))
    for first, seg in trace.instructions.segments():
        items, reps = (seg, 1) if isinstance(seg, list) else (seg.template, seg.count)
        if not items:
            continue
        m = len(items) * reps
        src[first:first + m] = np.tile(ids(items, source, sid), reps)
        op[first:first + m] = np.tile(ids(items, opcode, oid), reps)
    return InstrTable(src, op, list(sid), list(oid))
