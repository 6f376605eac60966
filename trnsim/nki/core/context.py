"""The state of one running kernel instance: target core, options, memories, trace, program ids."""
from __future__ import annotations

import itertools
import operator
import threading
import warnings
import weakref
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...errors import CapacityError, KernelError, UninitializedReadError, UninitializedReadWarning
from ...hardware import load_catalog
from ...hardware.schema import ChipSpec, CoreSpec
from ...options import Options
from ...source import SourceLoc, describe, user_loc
from . import dtypes as dt
from .conventions import Conventions, spills_sbuf
from .memory import Accountant, ManualMemory
from .spill import insert_spills, needs_spill_plan
from .storage import Storage
from ...ir.engines import ENGINES
from ...ir.loops import untrack
from ...ir.trace import Instruction, Region, Trace

# NamedTuples built with tuple.__new__ on the hot path: their own __new__ is a Python function
_tuple_new = tuple.__new__
_FIRST_LAST_BYTES = operator.itemgetter(0, 1, 2)  # of an Accountant interval (profile occupancy)

_tls = threading.local()


def current() -> "KernelContext":
    """The kernel context running in this thread; outside a kernel, a KernelError."""
    ctx = getattr(_tls, "ctx", None)
    if ctx is None:
        raise KernelError("this NKI API can only be called inside a running kernel "
                          "(call the kernel through nki.jit / simulate_kernel / nki.simulate)",
                          rule="err_nki_api_outside_of_nki_kernel", where=describe(user_loc()))
    return ctx


def maybe_current() -> Optional["KernelContext"]:
    """The kernel context running in this thread, or None."""
    return getattr(_tls, "ctx", None)


class KernelContext:
    """Everything a running kernel instance touches.  One per program instance / logical core."""

    def __init__(self, *, options: Options, conventions: Conventions, core_id: int = 0,
                 program_id: Tuple[int, ...] = (), grid: Tuple[int, ...] = (),
                 trace: Optional[Trace] = None, shared: Optional[dict] = None,
                 kernel_name: str = "kernel", lnc: int = 1, track_spills: bool = False):
        cat = load_catalog(options.hardware_file)
        self.catalog = cat
        self.chip: ChipSpec = cat.chip_for(options.target)
        self.spec: CoreSpec = cat.cores[self.chip.core]
        self.options = options
        self.conventions = conventions  # what the compiler in front of the core does
        conv = cat.numerics.get("conversion", {})
        # SPMD instances run one after another on the core, so each gets its own random stream
        # (restarting one stream per instance would repeat the same stochastic rounding and
        # random numbers in every instance of a grid)
        inst = int(np.ravel_multi_index(program_id, grid)) if grid and program_id else 0
        self.convert = dt.Converter(precise=options.precise_fp,
                                    stochastic=options.stochastic_rounding,
                                    seed=options.seed + 7919 * core_id + 104729 * inst,
                                    float_to_int_rounding=conv.get("float_to_int_rounding", "rne"),
                                    float_to_int_overflow=conv.get("float_to_int_overflow", "saturate"))
        self.numerics = not options.timing_only
        # hot-path copies of two per-operand checks (ops/base.tile): partition limit and the
        # (engine, memory) pairs each engine may read
        self.pmax = self.spec.tile_size.pmax
        self.op_plans: Dict[tuple, tuple] = {}  # per-shape results of an op's rule checks
        self.dtypes_ok: set = set()  # dtypes the target was checked to support (gates.py)
        eng = self.spec.engines
        self.readable = frozenset((e, m) for e in ENGINES if hasattr(eng, e)
                                  for m in ("sbuf", "psum", "hbm")
                                  if "r" in getattr(getattr(eng, e), m, ""))
        self.core_id = core_id
        self.program_id = program_id
        self.grid = grid
        self.lnc = lnc
        self.trace = trace if trace is not None else Trace(target=options.target)
        self.shared = shared if shared is not None else {}
        self.kernel_name = kernel_name
        self.sbuf = Accountant("sbuf", self.spec.sbuf)
        self.psum = Accountant("psum", self.spec.psum)
        self.spill_sbuf = spills_sbuf(conventions, self.spec.sbuf)  # the compiler's, per core data
        if self.spill_sbuf or track_spills:
            # the compiler spills SBUF (or this run must spill the copies it inserts, which a
            # kernel that fails on its own overflow still may not): keep what spill.py needs
            self.sbuf.accesses = {}
        self.hbm_used = 0
        self._manual: Dict[str, ManualMemory] = {}
        self.uninit_origins: List[str] = []
        self.uninit_reported: set = set()
        self.rng = np.random.default_rng(options.seed + 1000003 * core_id + 15485863 * inst)
        self.name_counter = itertools.count()
        self.shared_hbm_seq = 0
        self.depth = 0  # nesting of inline sub-kernel calls
        self.loops: list = []  # [iteration, traced_once] per active nl.*_range loop
        self.placements: dict = {}  # manual allocation call stack -> first placement
        self.pending_zero: dict = {}  # PSUM region id -> zero-fill not yet traced (alloc.fill)
        self.ff_watch: list = []  # fastforward.py: lists collecting weakrefs of new storages

    # -- memories ---------------------------------------------------------------------------
    def manual(self, memory: str) -> ManualMemory:
        """The physical buffer of memory that manual placements share."""
        m = self._manual.get(memory)
        if m is None:
            m = ManualMemory(memory, self.spec.sbuf if memory == "sbuf" else self.spec.psum,
                             self.options.uninit)
            self._manual[memory] = m
        return m

    def accountant(self, memory: str) -> Accountant:
        """The capacity accountant of memory (sbuf or psum)."""
        return self.sbuf if memory == "sbuf" else self.psum

    def new_storage(self, memory: str, kind: str, name: Optional[str], nbytes: int,
                    sdtype: np.dtype, partitions: int, pstride: int, *, account: bool,
                    loc: Optional[SourceLoc] = None, fill: bool = True) -> Storage:
        """A new storage of nbytes, charged against capacity when account."""
        if name is None or name == "":
            name = f"t{next(self.name_counter)}"
        fill = None if not (self.numerics and fill) else self.options.uninit
        st = Storage(memory=memory, kind=kind, name=name, nbytes=nbytes, sdtype=sdtype,
                     partitions=partitions, pstride=pstride, loc=loc or user_loc(), fill=fill,
                     full=not self.numerics)  # timing-only: no values, so no init tracking
        if self.ff_watch:
            ref = weakref.ref(st)
            for w in self.ff_watch:
                w.append(ref)
        if account:
            self.charge(st)
        return st

    def charge(self, st: Storage, first: Optional[int] = None) -> None:
        """Count a storage against its memory's capacity (at allocation, or when a temporary
        result is first used as an operand: ``first`` is then the instruction that produced it)."""
        if st.accounted:
            return
        if st.memory == "hbm":
            self.check_hbm(st.nbytes, st.name)
            self.hbm_used += st.nbytes
            st.accounted = True
            return
        self.accountant(st.memory).charge(st, 0, st.partitions, st.row_bytes,
                                          len(self.trace.instructions) if first is None else first)

    def check_hbm(self, nbytes: int, name: str) -> None:
        """Raise before an HBM allocation that would not fit the core's share of HBM."""
        cap = self.chip.hbm_bytes_per_core
        if self.hbm_used + nbytes > cap:
            raise CapacityError(f"HBM overflow allocating '{name}' ({nbytes} B)",
                                rule="hbm-capacity", limit=f"{cap} B per NeuronCore",
                                value=f"{self.hbm_used + nbytes} B", where=describe(user_loc()))

    # -- trace ------------------------------------------------------------------------------
    def record(self, engine: str, opcode: str, reads, writes, partitions: int, free: int,
               dtype_in: str, dtype_out: str, attrs: Tuple = (), loc: Optional[SourceLoc] = None,
               fresh_writes: bool = False) -> int:
        """Append one instruction.  ``fresh_writes``: the writes are new tiles' own regions,
        unique by construction, so interning them would only grow the table."""
        tr = self.trace
        if self.pending_zero:
            self._resolve_pending_zero(engine, reads, writes, loc)
        il = tr.instructions
        idx = il._n
        intern = tr.intern
        ins = _tuple_new(Instruction, (idx, engine, opcode, tuple([intern(r) for r in reads]),
                                       tuple(writes) if fresh_writes else
                                       tuple([intern(r) for r in writes]), int(partitions),
                                       int(free), dtype_in, dtype_out, tuple(attrs),
                                       loc if loc is not None else user_loc(), self.core_id))
        for r in reads:
            m = r.memory
            if m == "sbuf":
                self.sbuf.touch(r.tensor, idx)
            elif m == "psum":
                self.psum.touch(r.tensor, idx)
        if not fresh_writes:  # a fresh tile is charged (and tracked) only once it is read
            for r in writes:
                m = r.memory
                if m == "sbuf":
                    self.sbuf.touch(r.tensor, idx, True)
                elif m == "psum":
                    self.psum.touch(r.tensor, idx, True)
        il.append(ins)
        untrack(ins)  # no cycles in a record: the collector need not walk the trace
        return idx

    def _resolve_pending_zero(self, engine, reads, writes, loc) -> None:
        pz = self.pending_zero
        for r in reads:
            if r.tensor in pz:
                self._trace_zero_fill(pz.pop(r.tensor), loc)
        for r in writes:
            if r.tensor in pz:
                info = pz.pop(r.tensor)
                if engine != "tensor":
                    self._trace_zero_fill(info, loc)

    def _trace_zero_fill(self, info, loc) -> None:
        reg, dname, shape = info
        free = 1
        for s in shape[1:]:
            free *= s
        # "deferred_zero": the allocation's own zeroing, moved to the first use; it belongs before
        # any loop the use sits in, so the race check (races.py) does not count it as a write there
        self.record("vector", "memset", [], [reg], shape[0], free, "-", dname,
                    (("value", 0.0), ("deferred_zero", True)), loc)

    def touch(self, r: Region, idx: int) -> None:
        """Note that instruction idx wrote region r (liveness, pending PSUM zeroing)."""
        if self.pending_zero:
            self.pending_zero.pop(r.tensor, None)  # the retargeted write initializes it
        if r.memory == "sbuf":
            self.sbuf.touch(r.tensor, idx, True)
        elif r.memory == "psum":
            self.psum.touch(r.tensor, idx, True)

    def check_capacity(self) -> None:
        """End of a kernel instance: peak SBUF/PSUM use under compiler-style liveness."""
        self.sbuf.check(spill=self.spill_sbuf)
        self.psum.check(trace=self.trace, peer=self.sbuf)  # trace: reordering liveness rules
        meta = self.trace.meta
        meta["sbuf_peak_bytes_per_partition"] = max(meta.get("sbuf_peak_bytes_per_partition", 0),
                                                    self.sbuf.peak)
        meta["psum_peak_bytes_per_partition"] = max(meta.get("psum_peak_bytes_per_partition", 0),
                                                    self.psum.peak)
        # the live ranges behind the peak, for the profile's occupancy over time (profile/insight):
        # flat [first, last, bytes per partition, ...] per memory, once per instance (no hot path)
        for acc in (self.sbuf, self.psum):
            meta.setdefault(f"{acc.memory}_live", []).extend(
                itertools.chain.from_iterable(map(_FIRST_LAST_BYTES, acc.intervals.values())))
            meta[f"{acc.memory}_manual_bytes"] = max(meta.get(f"{acc.memory}_manual_bytes", 0),
                                                      acc.manual_end)
        if self.sbuf.spill_excess:
            meta["sbuf_spill_bytes_per_partition"] = max(
                meta.get("sbuf_spill_bytes_per_partition", 0), self.sbuf.spill_excess)
            meta["sbuf_spill_cause"] = "copies" if self.sbuf.copy_spill else \
                "blocks" if self.sbuf.block_spill else "overflow"
            self._insert_spills()
        elif self.spill_sbuf and self.sbuf.intervals and \
                (cause := needs_spill_plan(self.sbuf, self.trace)):   # held copies, fragmentation
            meta["sbuf_spill_cause"] = cause
            self._insert_spills()
        else:
            self.sbuf.place(self.trace)  # physical bytes of automatic tiles for timing (placement.py)

    def _insert_spills(self) -> None:
        if self.trace.instructions.blocks:
            # synthesized iterations hold tiles the accountant never saw: trace them all
            from .fastforward import Rerun
            raise Rerun()
        insert_spills(self.sbuf, self.trace, self.core_id, self.spec)

    # -- uninitialized values -----------------------------------------------------------------
    def note_uninit_read(self, t, what: str) -> None:
        """Remember where a never-written value was read (for the report's origin)."""
        if len(self.uninit_origins) < 8:
            st = t._st
            where = f"{st.loc.file.split('/')[-1]}:{st.loc.line}" if st.loc else "?"
            loc = user_loc()
            self.uninit_origins.append(
                f"{what} reads never-written {st.memory.upper()} tensor '{t.name}' (allocated at "
                f"{where}) at {loc.file.split('/')[-1]}:{loc.line}")

    def report_uninit(self, message: str, rule: str = "uninitialized-read",
                      loc: Optional[SourceLoc] = None) -> None:
        """A never-written value reached an output: warning, or error under TRNSIM_STRICT=1.
        ``loc`` names the kernel line when the report is made after the kernel returned."""
        loc = loc or user_loc()
        key = (loc, rule)
        if key in self.uninit_reported:
            return
        self.uninit_reported.add(key)
        origins = ("; origin: " + " | ".join(self.uninit_origins[:3])) if self.uninit_origins else ""
        text = message + origins
        if self.options.strict:
            raise UninitializedReadError(text, rule=rule, where=describe(loc))
        # filed under the kernel's own line, not this one (warn's stacklevel would name trnsim)
        warnings.warn_explicit(UninitializedReadWarning(f"[{rule}] {text} at {loc.file}:{loc.line}"),
                               UninitializedReadWarning, loc.file, loc.line)


class running:
    """Context manager making ``ctx`` the current kernel context of this thread."""

    def __init__(self, ctx: KernelContext):
        self.ctx = ctx
        self.prev = None

    def __enter__(self):
        self.prev = getattr(_tls, "ctx", None)
        _tls.ctx = self.ctx
        return self.ctx

    def __exit__(self, *exc):
        _tls.ctx = self.prev
        return False


# -- regions ---------------------------------------------------------------------------------
def region(t) -> Region:
    """The Region a tensor view covers (bounding box for gathers, flagged indirect)."""
    r = t._region
    if r is None:
        if t._gather is None:
            # views are rebuilt every loop iteration with the same geometry: cache per storage
            key = (t._off, t._shape, t._strides, t._dtype, t._pdim)
            cache = t._st.rcache
            if cache is None:
                cache = t._st.rcache = {}
            r = cache.get(key)
            if r is None:
                r = cache[key] = _region(t)
        else:
            r = _region(t)
        t._region = r
    return r


def fresh_region(st, shape, dtype) -> Optional[Region]:
    """The Region of a whole freshly allocated row-major tile (what ``_region`` computes for it,
    without the walk over dims: every op's result tile needs one); None for HBM (rows x bytes
    regions need the general walk)."""
    if st.memory == "hbm":
        return None
    isz = st.sdtype.itemsize
    free = 1
    for s in shape[1:]:
        free *= s
    return _tuple_new(Region, (st.memory, st.region_id, st.name, 0, shape[0], 0, free * isz,
                               shape[0] * free, dt.name(dtype), free * isz, False))


def _region(t) -> Region:
    st = t._st
    g = t._gather
    indirect = False
    if g is not None:
        t = g.base
        indirect = True
    shape, strides, off = t._shape, t._strides, t._off
    isz = st.sdtype.itemsize
    n = 1
    for s in shape:
        n *= s
    if g is not None:
        n = 1
        for s in g.shape:
            n *= s
    if st.memory == "hbm":
        lo = hi = off
        for c, s in zip(shape, strides):
            if c > 1:
                span = (c - 1) * s
                if span < 0:
                    lo += span
                else:
                    hi += span
        run = isz
        for c, s in zip(reversed(shape), reversed(strides)):
            if c == 1:
                continue
            if s == run:
                run *= c
            else:
                break
        lo -= st.base_off
        hi += isz - st.base_off
        pitch = st.hbm_pitch
        if pitch <= 0:
            return Region("hbm", st.region_id, st.name, 0, 1, lo, hi, n, dt.name(t._dtype), run,
                          indirect)
        # rows x column bytes: strides that are whole rows move the row range, the rest the
        # column range; an access whose columns wrap past a row falls back to whole rows
        r0, c0 = divmod(off - st.base_off, pitch)
        r1, c1 = r0, c0
        for c, s in zip(shape, strides):
            if c > 1 and s:
                if s % pitch == 0:
                    if s < 0:
                        r0 += (c - 1) * s // pitch
                    else:
                        r1 += (c - 1) * s // pitch
                elif s < 0:
                    c0 += (c - 1) * s
                else:
                    c1 += (c - 1) * s
        if c0 < 0 or c1 + isz > pitch:
            r0, r1 = lo // pitch, (hi - 1) // pitch
            c0, c1 = (lo - r0 * pitch, hi - r0 * pitch - isz) if r0 == r1 else (0, pitch - isz)
        return Region("hbm", st.region_id, st.name, r0, r1 - r0 + 1, c0, c1 + isz, n,
                      dt.name(t._dtype), run, indirect)
    ps = st.pstride
    p0, b0 = divmod(off, ps)
    parts = 1
    lo = hi = b0
    pd = t._pdim or 0
    for i, (c, s) in enumerate(zip(shape, strides)):
        if c <= 1:
            continue
        if i == pd and s == ps:
            parts = c
            continue
        if i == pd and s % ps == 0 and s != 0:
            parts = (c - 1) * (s // ps) + 1
            continue
        span = (c - 1) * s
        if span < 0:
            lo += span
        else:
            hi += span
    run = isz
    for i in range(len(shape) - 1, -1, -1):
        c, s = shape[i], strides[i]
        if i == pd or c == 1:
            continue
        if s == run:
            run *= c
        else:
            break
    return Region(st.memory, st.region_id, st.name, p0, parts, lo, hi + isz, n,
                  dt.name(t._dtype), run, indirect)
