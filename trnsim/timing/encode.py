"""Flatten a Trace into numpy arrays for the native dependency analysis and scheduler.

One pass over ``trace.instructions`` (which may be a lazy sequence) records per instruction only
its *shape* id and the geometry of its regions.  A shape is everything the cost model reads:
engine, opcode, work shape, dtypes, attributes, and per region its memory, partition count, element
count, dtype, contiguous run and indirect flag; addresses and tensor ids are left out.  Costs are
then computed once per shape (``cost_table``), so a trace of a million instructions with a few dozen
shapes calls the CostModel a few dozen times.

``encode`` uses the C encoder when the extension is built and the trace holds NamedTuple records
(long synthesized loop blocks are expanded with numpy rather than materialized); ``encode_py`` is
the same encoding in plain Python (the reference the tests compare against).  Both carry the
trace's SBUF placement map; ``EncodedTrace.dep_geo`` applies it for the dependency analysis.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..ir.trace import Instruction, Region, Trace
from .assign import cost_on
from .costs import CostModel
from .regions import physical_map
from .rules import PSUM_PORT_ENGINES, SBUF_PORT_ENGINES
from . import native_ext
from ..ir.engines import ENGINE_CODE, ENGINE_ORDER, check as check_engine

# CostModel fields read per region (costs.py); the rest (tensor, name, partition, start, stop) is
# address, which is why it is left out of the shape key
_SHAPE_FIELDS = ("memory", "partitions", "elements", "dtype", "contiguous", "indirect")
_INS_FIELDS = ("engine", "opcode", "reads", "writes", "partitions", "free", "dtype_in", "dtype_out",
               "attrs")
_REGION_FIELDS = ("memory", "tensor", "partition", "partitions", "start", "stop", "elements", "dtype",
                  "contiguous", "indirect")
INS_FIELD_INDEX = tuple(Instruction._fields.index(f) for f in _INS_FIELDS)
REGION_FIELD_INDEX = tuple(Region._fields.index(f) for f in _REGION_FIELDS)

# kinds of shape the scheduler distinguishes
KIND_COMPUTE, KIND_TENSOR, KIND_DMA = 0, 1, 2
PORT_SBUF, PORT_PSUM = 1, 2


@dataclass
class EncodedTrace:
    """A trace as arrays: per instruction its shape, per region access (reads then writes, in
    instruction order) the allocation and rectangle."""
    n: int
    shape: np.ndarray          # int32[n]
    reg_mem: np.ndarray        # uint8[R]: index into ``memories``
    reg_geo: np.ndarray        # int64[R, 5]: tensor, first partition, partitions, start, stop
    reps: List[Instruction]    # one instruction of each shape
    engines: List[str]         # engine names by code (ENGINE_ORDER first)
    memories: List[str]        # memory names by code
    # SBUF tile id -> (physical buffer, offset) from the compiler's allocator (deps.physical_map)
    placement: Optional[Dict[int, Tuple[int, int]]] = None

    @property
    def dep_geo(self) -> np.ndarray:
        """``reg_geo`` with placed SBUF tiles moved onto their physical bytes: what dependencies
        compare (the scheduler's own reads of ``reg_geo``, the stationary operand, stay logical)."""
        if not self.placement or "sbuf" not in self.memories:
            return self.reg_geo
        keys = np.fromiter(self.placement.keys(), dtype=np.int64, count=len(self.placement))
        vals = np.array(list(self.placement.values()), dtype=np.int64).reshape(-1, 2)
        order = np.argsort(keys)
        keys, vals = keys[order], vals[order]
        geo = self.reg_geo.copy()
        sb = np.flatnonzero(self.reg_mem == self.memories.index("sbuf"))
        t = geo[sb, 0]
        at = np.minimum(np.searchsorted(keys, t), len(keys) - 1)
        hit = keys[at] == t
        rows, at = sb[hit], at[hit]
        geo[rows, 0] = vals[at, 0]
        geo[rows, 3] += vals[at, 1]
        geo[rows, 4] += vals[at, 1]
        return geo

    @property
    def shape_engine(self) -> np.ndarray:
        """Engine code per shape."""
        return np.array([self.engines.index(r.engine) for r in self.reps], dtype=np.uint8)

    @property
    def shape_nreads(self) -> np.ndarray:
        """Regions read per shape."""
        return np.array([len(r.reads) for r in self.reps], dtype=np.int32)

    @property
    def shape_nregs(self) -> np.ndarray:
        """Regions read and written per shape."""
        return np.array([len(r.reads) + len(r.writes) for r in self.reps], dtype=np.int32)


def encode(trace: Trace) -> EncodedTrace:
    """Encode ``trace`` (C encoder when available, else ``encode_py``)."""
    mod = native_ext.module()
    if mod is None:
        return encode_py(trace)
    try:
        try:
            enc = _NativeEncoder(mod).run(_plan(trace.instructions))
        except _BlockMismatch:  # a loop block this code cannot expand: read it record by record
            enc = _NativeEncoder(mod).run([(False, trace.instructions)])
    except native_ext.NotTuples:  # records that are not NamedTuples: the attribute-based encoder
        return encode_py(trace)
    enc.placement = physical_map(trace)
    return enc


# A synthesized loop block (trace.LoopBlock) at least this long is expanded with numpy from its
# template and per-iteration deltas instead of being materialized record by record (which costs
# microseconds per record); shorter ones are not worth the per-block overhead.
_BLOCK_MIN = 256
_BLOCK_ATTRS = ("template", "k0", "count", "deltas", "nlocal", "synth_first", "n", "materialize")


class _BlockMismatch(Exception):
    """A LoopBlock whose records differ from what the vectorized expansion assumes."""


def _is_block(seg) -> bool:
    return not isinstance(seg, list) and all(hasattr(seg, a) for a in _BLOCK_ATTRS) and \
        seg.n >= _BLOCK_MIN and len(seg.template) * seg.count == seg.n


def _plan(instrs):
    """``(is_block, segment)`` in program order: long loop blocks, and iterables of records
    between them.  A plain sequence is one iterable (read once, in order)."""
    segments = getattr(instrs, "segments", None)
    if segments is None:
        return [(False, instrs)]
    segs = list(segments())
    if not any(_is_block(seg) for _, seg in segs):
        return [(False, instrs)]
    plan, run = [], []
    for first, seg in segs:
        if _is_block(seg):
            if run:
                plan.append((False, itertools.chain.from_iterable(run)))
                run = []
            plan.append((True, seg))
        else:
            run.append(seg if isinstance(seg, list) else seg.materialize(first))
    if run:
        plan.append((False, itertools.chain.from_iterable(run)))
    return plan


class _NativeEncoder:
    """Drives the C encoder over the parts of a trace, shapes numbered across all of them."""

    def __init__(self, mod):
        self.mod = mod
        self.reps: List[Instruction] = []
        self.engines = list(ENGINE_ORDER)
        self.memories: List[str] = []
        self.parts = []

    def _encode(self, records):
        n, shape, mem, geo = self.mod.encode(records, INS_FIELD_INDEX, REGION_FIELD_INDEX,
                                             self.engines, self.memories, self.reps)
        return (np.frombuffer(shape, dtype=np.int32), np.frombuffer(mem, dtype=np.uint8),
                np.frombuffer(geo, dtype=np.int64).reshape(-1, 5))

    def run(self, plan) -> EncodedTrace:
        for is_block, seg in plan:
            self.parts.append(self._block(seg) if is_block else self._encode(seg))
        if len(self.parts) == 1:
            shape, mem, geo = self.parts[0]
        else:
            shape, mem, geo = (np.concatenate([p[k] for p in self.parts]) for k in range(3))
        return EncodedTrace(len(shape), shape, mem, geo.reshape(-1, 5), self.reps, self.engines,
                            self.memories)

    def _block(self, blk):
        """Iteration c of the block is its template with every region moved by
        (c + k0) x (partition, start, stop) deltas and block-local tiles renamed (LoopBlock._make)."""
        shape, mem, geo = self._encode(list(blk.template))
        d = np.array([x for per in blk.deltas for x in per], dtype=np.int64).reshape(-1, 4)
        if len(d) != len(geo) or len(blk.deltas) != len(blk.template):
            raise _BlockMismatch()
        count = blk.count
        k = (blk.k0 + np.arange(count, dtype=np.int64))[:, None]
        out = np.empty((count,) + geo.shape, dtype=np.int64)
        out[:] = geo
        out[:, :, 1] += k * d[:, 0]
        out[:, :, 3] += k * d[:, 1]
        out[:, :, 4] += k * d[:, 2]
        local = np.flatnonzero(d[:, 3] >= 0)
        if len(local):
            c = np.arange(count, dtype=np.int64)[:, None]
            out[:, local, 0] = -(blk.synth_first + c * blk.nlocal + d[local, 3])
        # the first and last records as the block materializes them must come out the same
        for pos, rows in ((0, out[0, :_nregs(blk.template[0])]),
                          (blk.n - 1, out[-1, len(geo) - _nregs(blk.template[-1]):])):
            ins = next(iter(blk.materialize(0, pos, pos + 1)))
            if [_geo(r) for r in tuple(ins.reads) + tuple(ins.writes)] != rows.tolist():
                raise _BlockMismatch()
        return np.tile(shape, count), np.tile(mem, count), out.reshape(-1, 5)


def _nregs(ins) -> int:
    return len(ins.reads) + len(ins.writes)


def _geo(r) -> list:
    return [int(r.tensor), int(r.partition), int(r.partitions), int(r.start), int(r.stop)]


def encode_py(trace: Trace) -> EncodedTrace:
    """The encoding in plain Python (reference for the C encoder; handles any record type)."""
    shapes: dict = {}
    reps: List[Instruction] = []
    engines = list(ENGINE_ORDER)
    memories: List[str] = []
    mem_code: dict = {}
    shape_ids: List[int] = []
    shape_mems: List[bytes] = []
    mem = bytearray()
    geo: List[int] = []
    for ins in trace.instructions:
        regs = tuple(ins.reads) + tuple(ins.writes)
        key = (ins.engine, ins.opcode, ins.partitions, ins.free, ins.dtype_in, ins.dtype_out,
               ins.attrs, len(ins.reads), len(ins.writes),
               tuple((r.memory, r.partitions, r.elements, r.dtype, r.contiguous, r.indirect)
                     for r in regs))
        try:
            s = shapes.get(key)
        except TypeError:  # unhashable attribute values: a shape of its own, not memoized
            s, key = None, None
        if s is None:
            s = len(reps)
            if key is not None:
                shapes[key] = s
            reps.append(ins)
            if ins.engine not in engines:
                engines.append(ins.engine)
            codes = bytearray()
            for r in regs:
                if r.memory not in mem_code:
                    mem_code[r.memory] = len(memories)
                    memories.append(r.memory)
                codes.append(mem_code[r.memory])
            shape_mems.append(bytes(codes))
        shape_ids.append(s)
        mem += shape_mems[s]
        for r in regs:
            geo += (int(r.tensor), int(r.partition), int(r.partitions), int(r.start), int(r.stop))
    return EncodedTrace(len(shape_ids), np.array(shape_ids, dtype=np.int32),
                        np.frombuffer(bytes(mem), dtype=np.uint8),
                        np.array(geo, dtype=np.int64).reshape(-1, 5), reps, engines, memories,
                        physical_map(trace))


@dataclass
class CostTable:
    """Per shape: what the scheduler needs from the CostModel (one row per shape)."""
    kind: np.ndarray        # uint8: KIND_COMPUTE / KIND_TENSOR / KIND_DMA
    engine: np.ndarray      # uint8 engine code
    nreads: np.ndarray      # int32
    nregs: np.ndarray       # int32
    occ: np.ndarray         # float64: occupancy (Tensor: stationary changed)
    occ_same: np.ndarray    # float64: Tensor occupancy with the stationary tile kept
    lat: np.ndarray         # float64
    flops: np.ndarray       # float64
    bf16eq: np.ndarray      # float64
    dma_bytes: np.ndarray   # int64
    hbm_bytes: np.ndarray   # int64
    dma_engines: np.ndarray  # int32: DMA queues the transfer spreads over
    dur: np.ndarray         # float64: DMA transfer time
    fixed: np.ndarray       # float64: DMA fixed latency
    ports: np.ndarray       # uint8: PORT_SBUF | PORT_PSUM (v2 shared ports it contends for)
    hidden: np.ndarray      # float64: access bubble that may overlap the previous instruction
    # engine alternatives (assign.py): shape s may run on alt_*[alt_off[s]:alt_off[s + 1]]
    # (default first); fewer than two entries = its own engine
    alt_off: np.ndarray     # int64[S + 1]
    alt_engine: np.ndarray  # uint8
    alt_occ: np.ndarray     # float64
    alt_lat: np.ndarray     # float64
    alt_hidden: np.ndarray  # float64
    alt_ports: np.ndarray   # uint8


def cost_table(enc: EncodedTrace, model: CostModel) -> CostTable:
    """Call the CostModel once per shape (twice for matmuls: stationary changed or kept)."""
    S = len(enc.reps)
    f = lambda: np.zeros(S, dtype=np.float64)  # noqa: E731
    kind = np.zeros(S, np.uint8)
    occ, occ_same, lat, flops, bf16eq, dur, fixed = f(), f(), f(), f(), f(), f(), f()
    dma_bytes = np.zeros(S, np.int64)
    hbm_bytes = np.zeros(S, np.int64)
    dma_engines = np.zeros(S, np.int32)
    ports = np.zeros(S, np.uint8)
    hidden = f()
    alt_off = np.zeros(S + 1, np.int64)
    alts: list = []  # (engine code, occ, lat, hidden, ports)
    pt = model.t.ports
    for s, ins in enumerate(enc.reps):
        eng = ins.engine
        if eng not in ENGINE_CODE:
            check_engine(eng)  # raises UnknownEngineError (a KeyError too), as the reference does
        alt_off[s] = len(alts)
        if eng == "dma":
            c = model.dma(ins)
            kind[s] = KIND_DMA
            dma_bytes[s] = c.bytes
            hbm_bytes[s] = c.hbm_bytes
            dma_engines[s] = c.engines
            dur[s] = c.bytes / c.rate_bytes_per_ns if c.rate_bytes_per_ns > 0 else 0.0
            fixed[s] = c.fixed_ns
            continue
        if eng == "tensor":
            kind[s] = KIND_TENSOR
            ch = model.matmul(ins, True)
            same = model.matmul(ins, False)
            occ[s], occ_same[s], lat[s] = ch.occupancy_ns, same.occupancy_ns, ch.latency_ns
            flops[s], bf16eq[s] = ch.flops, ch.pe_bf16_equiv
            continue
        c = model.compute(ins)
        occ[s], lat[s], hidden[s] = c.occupancy_ns, c.latency_ns, c.hidden_ns
        ports[s] = _ports(pt, eng, ins)
        for e in model.auto_engines(ins):
            ce = cost_on(model, ins, e)
            alts.append((ENGINE_CODE[e], ce.occupancy_ns, ce.latency_ns, ce.hidden_ns,
                         _ports(pt, e, ins)))
    alt_off[S] = len(alts)
    cols = list(zip(*alts)) if alts else [(), (), (), (), ()]
    return CostTable(kind, enc.shape_engine, enc.shape_nreads, enc.shape_nregs, occ, occ_same, lat,
                     flops, bf16eq, dma_bytes, hbm_bytes, dma_engines, dur, fixed, ports, hidden,
                     alt_off, np.array(cols[0], np.uint8), np.array(cols[1], np.float64),
                     np.array(cols[2], np.float64), np.array(cols[3], np.float64),
                     np.array(cols[4], np.uint8))


def _ports(pt, eng: str, ins: Instruction) -> int:
    """PORT_SBUF | PORT_PSUM: the v2 shared ports ``ins`` on ``eng`` contends for."""
    regs = tuple(ins.reads) + tuple(ins.writes)
    out = 0
    if pt.vector_gpsimd_share_sbuf and eng in SBUF_PORT_ENGINES and \
            any(r.memory == "sbuf" for r in regs):
        out |= PORT_SBUF
    if pt.vector_scalar_share_psum and eng in PSUM_PORT_ENGINES and \
            any(r.memory == "psum" for r in regs):
        out |= PORT_PSUM
    return out
