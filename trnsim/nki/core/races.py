"""Race detection: parallel iterations, SPMD programs or LNC cores touching the same bytes unordered.

The idea is JAX Pallas interpret mode's race detector.  Two *sides* that the hardware (or the
compiler) may run in any order or at the same time -- two iterations of one ``affine_range`` loop,
two programs of a legacy SPMD grid, two logical cores of an LNC=2 launch between two barriers --
race when they touch overlapping bytes of one tensor and at least one of them writes.

Not a race (the NKI docs call these legal):
- associative accumulation (``nki.language.affine_range`` docs: "associative reductions are not
  considered loop carried dependencies"): ``psum[...] += nisa.nc_matmul(...)`` (the matmul's
  accumulate flag), ``acc += x`` on SBUF (the ``nl.loop_reduce`` docs point to ``+=`` for SBUF
  accumulation), ``nl.loop_reduce``, and DMAs that read-modify-write their destination
  (``dma_copy(dst_rmw_op=np.add)``): every side accumulating into the same bytes is fine, a plain
  read or write of those bytes from another side is not;
- reads of the same bytes from many sides;
- tiles allocated inside the loop body: each iteration gets its own buffer, so only tensors that
  exist before the loop starts (ids below the loop's first storage id) are compared;
- bytes separated by an LNC ``core_barrier`` (or a ``sendrecv``, which waits for the peer);
- writes of one constant (a ``memset``, or a copy of a tile one ``memset`` filled) from every side:
  either order leaves the same bytes (the NKI library zero-fills a shared output from both cores);
- two writes from the same line by SPMD programs / LNC cores that never read ``program_id``: such
  replicas compute the same values (the nki-samples resize kernel launched on a grid does this).
Not checked: manually placed SBUF/PSUM tiles (every one shares the physical buffer; the compiler
orders accesses by address), indirect (gather/scatter) accesses, whose regions are bounding boxes
and would only give false alarms, and the new ``nki`` API's loops (all unrolled, so sequential).

Cost: a loop only records ``(iteration, first instruction, remap epoch)`` per iteration; the pass
runs when the loop ends, over the instructions of its iterations, keyed by region object, and
compares overlapping rectangles per tensor with a sweep (no all-pairs over instructions).  In
timing-only runs a fast-forwarded loop's synthesized iterations are never materialized: the pass
compares the iterations that ran (0, 1, 2 and the last), and races_ff.py checks every pair of
iterations on the LoopBlock's template and per-iteration steps (exact for slots that move by the
same step; slots with different steps are only compared on the iterations that ran).
"""
from __future__ import annotations

import itertools
import linecache
import re
import warnings
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ...errors import RaceError, RaceWarning
from ...source import SourceLoc, describe
from . import storage as _storage
from .race_ranges import _lowest_moved, _Recorded

_W, _R, _A = 1, 2, 3            # roles of an access: write, read, accumulate
_ROLE = {_W: "writes", _R: "reads", _A: "accumulates into"}
# most race warnings one launch prints: past this the kernel has one systematic bug repeated
MAX_WARNINGS = 20
_FINDINGS = "race_findings"     # key of the per-launch ``shared`` dict that collects findings
_PID_READ = "race_program_id_read"  # set once any program / core asked for its program_id
_SYNC_OPCODES = ("core_barrier", "sendrecv")   # order the two LNC cores (both wait for the peer)
# ``acc += x`` (also -=, *=, /=, //=, %=, **=, @=, &=, |=, ^=, <<=, >>=), not ``f(max=1)``
_AUG_ASSIGN = re.compile(r"[\w\])]\s*(\+|-|\*|/|//|%|\*\*|@|&|\||\^|<<|>>)=(?!=)")
_aug_cache: Dict[Tuple[str, int], bool] = {}


@dataclass(frozen=True)
class RaceFinding:
    """Two unordered sides touching overlapping bytes of one tensor, at least one writing."""
    rule: str
    what: str           # "affine_range iterations", "SPMD programs", "LNC cores"
    tensor: str
    memory: str
    overlap: str        # the overlapping rectangle, in words
    first: Tuple[str, str, SourceLoc]    # (side label, role, source line): the writing side
    second: Tuple[str, str, SourceLoc]

    def key(self) -> tuple:
        """What makes two findings the same report (a loop run many times reports once)."""
        return (self.rule, self.tensor, self.first[2], self.first[1], self.second[2],
                self.second[1])

    def message(self) -> str:
        """The report: both sides with their lines, the tensor and the overlapping region."""
        (la, ra, a), (lb, rb, b) = self.first, self.second
        hint = {"race-affine-range": "affine_range iterations have no order: use "
                                     "nl.sequential_range for a carried dependency, give each "
                                     "iteration its own slice, or accumulate with +=",
                "race-spmd": "give each program its own slice (program_id) of the tensor",
                "race-lnc": "give each core its own slice, or put nisa.core_barrier between"}
        return (f"{self.what} touch {self.memory.upper()} tensor '{self.tensor}' {self.overlap} "
                f"in no defined order: {la} {ra} it at {_short(a)}, {lb} {rb} it at {_short(b)} "
                f"({hint.get(self.rule, '')})")


def _short(loc: SourceLoc) -> str:
    return f"{loc.file}:{loc.line}"


# -- recording (called from the loop iterator and the launcher) ------------------------------------
class LoopRecord:
    """One running ``affine_range`` loop: ``marks`` holds (iteration, first instruction index,
    remap epoch) per iteration that ran, flat; ``sid0`` the first storage id allocated inside."""
    __slots__ = ("marks", "sid0", "values")

    def __init__(self, values: range):
        self.marks: list = []
        self.sid0 = next(_storage._ids)  # consuming one id is harmless; later ids are larger
        self.values = values  # the loop index of each iteration (reports name those)


def end_loop(ctx, rec: LoopRecord) -> None:
    """The loop finished: compare its iterations and keep what races for the end of the launch."""
    trace = ctx.trace
    il = trace.instructions
    end = len(il)
    epoch = trace.remap_epoch()
    m = rec.marks
    starts = []
    low = _lowest_moved(trace, min(m[2::3]) if m else epoch, epoch)
    for j in range(0, len(m), 3):
        k, pos, ep = m[j], m[j + 1], m[j + 2]
        if ep < epoch and pos >= low[ep]:  # a fast-forwarded loop moved instructions from here
            pos = trace.resolve(pos, ep)
        starts.append((k, pos))
    if len(starts) < 2:
        return
    starts.sort()
    if len(starts) == len(rec.values):
        bounds = [(k, a, starts[i + 1][1] if i + 1 < len(starts) else end)
                  for i, (k, a) in enumerate(starts)]
    else:  # synthesized iterations in between: every iteration has the length of the first
        length = starts[1][1] - starts[0][1]
        bounds = [(k, a, a + length) for k, a in starts]
    rec_of = _Recorded(il)
    sides = [(k, rec_of(a, b)) for k, a, b in bounds]
    vals = rec.values
    label = (lambda k: f"iteration {vals[k]}")
    found = detect(sides, rec.sid0, frozenset(), "race-affine-range", "affine_range iterations",
                   label)
    if len(starts) < len(vals):
        found += _synthesized(il, bounds, rec, label)
    if found:
        ctx.shared.setdefault(_FINDINGS, []).extend(found)


def _synthesized(il, bounds, rec: LoopRecord, label) -> List[RaceFinding]:
    """Races between any two iterations of a fast-forwarded loop, from its LoopBlock's template
    and steps (races_ff.py): the block starts where the third recorded iteration ends."""
    from .races_ff import block_races
    at = bounds[2][2] if len(bounds) > 3 else None
    block = None
    for base, seg in zip(il._starts, il._segs):  # read-only segment table (see _Recorded)
        if base == at and not isinstance(seg, list):
            block = seg
            break
    if block is None:
        return []

    def role_of(ins, r, is_write):
        if is_write:
            return _A if _accumulates(ins, r) else _W
        return None if r in ins.writes and _accumulates(ins, r) else _R

    out = []
    for a, b in block_races(block, len(rec.values), rec.sid0, role_of):
        got = ((a[0], a[1], a[2]), (b[0], b[1], b[2]), _overlap(a[3], b[3]))
        out.append(_finding(got, "race-affine-range", "affine_range iterations", label))
    return out


class ProgramMarks:
    """Where each SPMD program of a legacy grid starts in the launch's one trace."""
    __slots__ = ("trace", "starts", "sid0")

    def __init__(self, trace):
        self.trace = trace
        self.starts: List[int] = []
        self.sid0 = next(_storage._ids)  # the launch's inputs exist; program tiles come later

    def mark(self) -> None:
        """A program is about to start (its instructions follow)."""
        self.starts.append(len(self.trace.instructions))


def note_program_id(ctx) -> None:
    """The kernel read its program id: its programs / cores may differ from one another."""
    ctx.shared[_PID_READ] = True


def _shared_ids(shared: dict) -> frozenset:
    """Storage ids of the launch's shared_hbm tensors (one storage every program/core uses)."""
    out = set()
    for k, v in shared.items():
        if isinstance(k, tuple) and k[:1] == ("shared_hbm",):
            st = getattr(v, "_st", None)
            if st is not None:
                out.add(st.region_id)
    return frozenset(out)


def check_programs(shared: dict, pm: ProgramMarks, grid: Sequence[int]) -> None:
    """After every program of a grid ran: programs have no order between them."""
    if len(pm.starts) < 2:
        return
    il = pm.trace.instructions
    ends = pm.starts[1:] + [len(il)]
    points = list(itertools.product(*[range(g) for g in grid])) if grid else [()]
    rec_of = _Recorded(il)
    sides = [(i, rec_of(a, b)) for i, (a, b) in enumerate(zip(pm.starts, ends))]
    found = detect(sides, pm.sid0, _shared_ids(shared), "race-spmd", "SPMD programs",
                   lambda i: f"program {points[i] if i < len(points) else i}",
                   replicas=not shared.get(_PID_READ))
    if found:
        shared.setdefault(_FINDINGS, []).extend(found)


def check_cores(shared: dict, traces: Sequence, sid0: int) -> None:
    """After both LNC cores ran: per barrier epoch, the cores have no order between them."""
    if len(traces) < 2:
        return
    ids = _shared_ids(shared)
    epochs = [_epochs(tr.instructions) for tr in traces]
    n = min(len(e) for e in epochs)
    for e in range(n):
        sides = [(c, _Recorded(traces[c].instructions)(*epochs[c][e]))
                 for c in range(len(traces))]
        found = detect(sides, sid0, ids, "race-lnc", "LNC cores" + (f" (after barrier {e})" if e
                                                                    else ""),
                       lambda c: f"core {c}", replicas=not shared.get(_PID_READ))
        if found:
            shared.setdefault(_FINDINGS, []).extend(found)


def _epochs(il) -> List[Tuple[int, int]]:
    """Instruction ranges between synchronization points of one core."""
    out, a = [], 0
    for ins in _Recorded(il)(0, len(il)):
        if ins.opcode in _SYNC_OPCODES:
            out.append((a, ins.index))
            a = ins.index + 1
    out.append((a, len(il)))
    return out


def report(shared: dict, strict: bool) -> None:
    """End of a launch: warn about each distinct race, or raise the first under strict mode."""
    found: List[RaceFinding] = shared.pop(_FINDINGS, None) or []
    if not found:
        return
    seen, unique = set(), []
    for f in found:
        if f.key() not in seen:
            seen.add(f.key())
            unique.append(f)
    if strict:
        f = unique[0]
        more = f" ({len(unique) - 1} more races)" if len(unique) > 1 else ""
        raise RaceError(f.message() + more, rule=f.rule,
                        limit=f"{f.what}: disjoint bytes unless every side accumulates",
                        value=f"overlap on '{f.tensor}' {f.overlap}", where=describe(f.first[2]))
    for f in unique[:MAX_WARNINGS]:
        loc = f.first[2]
        w = RaceWarning(f"[{f.rule}] {f.message()} at {_short(loc)}", rule=f.rule,
                        first=f.first, second=f.second, tensor=f.tensor, region=f.overlap)
        warnings.warn_explicit(w, RaceWarning, loc.file, loc.line)


# -- the detector -----------------------------------------------------------------------------
def _augmented(loc: SourceLoc) -> bool:
    """Is the source line an augmented assignment (``acc += x``): the docs' SBUF accumulation."""
    key = (loc.file, loc.line)
    got = _aug_cache.get(key)
    if got is None:
        text = linecache.getline(loc.file, loc.line)
        got = _aug_cache[key] = bool(_AUG_ASSIGN.search(text.split("#", 1)[0]))
    return got


def _accumulates(ins, w) -> bool:
    """Does ``ins`` accumulate into ``w`` (it reads the same bytes as part of a legal reduction)?"""
    if w not in ins.reads:
        return False
    if ins.engine == "dma":    # a DMA reads its destination only to read-modify-write it
        return True
    for k, v in ins.attrs:
        if (k == "accumulate" or k == "loop_reduce") and v:
            return True
    return _augmented(ins.source)


def detect(sides: Iterable[Tuple[object, Iterable]], sid0: int, also: frozenset, rule: str,
           what: str, label, replicas: bool = False) -> List[RaceFinding]:
    """Compare the accesses of unordered ``sides`` ((side id, instructions) in order) to the
    tensors every side can see: storage ids in ``[0, sid0)`` (older than the sides) and those in
    ``also``; one finding per racing tensor.  ``replicas``: the sides never read their program id,
    so a write both make from the same line writes the same values (not a race).  (The
    per-region work is inlined: it runs for every operand of every instruction in a loop.)"""
    per: Dict[int, dict] = {}
    for side, instrs in sides:
        consts: dict = {}
        for ins in instrs:
            accs = None
            const = _constant(ins, consts) if consts or ins.opcode == "memset" else None
            for w in ins.writes:
                t = w.tensor
                if not (0 <= t < sid0 or (also and t in also)) or w.indirect:
                    continue
                if ins.opcode == "memset" and ("deferred_zero", True) in ins.attrs:
                    break  # the zeroing of an accumulator allocated before the loop (context.py)
                role = _W
                if _accumulates(ins, w):
                    role = _A
                    accs = (w,) if accs is None else accs + (w,)
                tmap = per.get(t)
                if tmap is None:
                    tmap = per[t] = {}
                e = tmap.get(id(w))
                if e is None:
                    e = tmap[id(w)] = [w, {}, {}, {}, {}]
                d = e[role]
                if side not in d:
                    d[side] = ins
                    if role == _W:
                        e[4][side] = const
                elif role == _W and e[4].get(side) != const:
                    e[4][side] = None  # this side writes two different things here
            for r in ins.reads:
                t = r.tensor
                if not (0 <= t < sid0 or (also and t in also)) or r.indirect or \
                        (accs is not None and r in accs):
                    continue
                tmap = per.get(t)
                if tmap is None:
                    tmap = per[t] = {}
                e = tmap.get(id(r))
                if e is None:
                    e = tmap[id(r)] = [r, {}, {}, {}, {}]
                d = e[_R]
                if side not in d:
                    d[side] = ins
    out = []
    for entries in per.values():
        f = _tensor_race(list(entries.values()), replicas)
        if f is not None:
            out.append(_finding(f, rule, what, label))
    return out


def _tensor_race(entries: list, replicas: bool = False):
    """The first racing pair among the accesses to one tensor (entries: [region, W, R, A])."""
    sides = set()
    roles = set()
    for e in entries:
        for role in (_W, _R, _A):
            if e[role]:
                sides.update(e[role])
                roles.add(role)
    if len(sides) < 2 or (_W not in roles and not (_R in roles and _A in roles)):
        return None
    entries = _merge_same_rect(entries)
    for e in entries:
        got = _conflict(e, e, replicas)
        if got is not None:
            return got
    if len(entries) == 1:
        return None
    # sweep along the dimension whose starts vary most (rows of HBM tiles, or bytes of columns)
    npart = len({e[0].partition for e in entries})
    nbyte = len({e[0].start for e in entries})
    by_part = npart >= nbyte

    def span(r):
        return (r.partition, r.partition + r.partitions) if by_part else (r.start, r.stop)

    def other(a, b):
        if by_part:
            return a.start < b.stop and b.start < a.stop
        return a.partition < b.partition + b.partitions and b.partition < a.partition + a.partitions

    entries.sort(key=lambda e: span(e[0])[0])
    active: list = []
    for e in entries:
        lo, hi = span(e[0])
        active = [a for a in active if a[0] > lo]
        for _, a in active:
            if other(a[0], e[0]):
                got = _conflict(a, e, replicas)
                if got is not None:
                    return got
        active.append((hi, e))
    return None


def _merge_same_rect(entries: list) -> list:
    """One entry per rectangle (views of other dtypes give other Region objects for the same
    bytes): the sweep then never holds many copies of one rectangle."""
    by: dict = {}
    for e in entries:
        r = e[0]
        key = (r.partition, r.partitions, r.start, r.stop)
        m = by.get(key)
        if m is None:
            by[key] = e
            continue
        for side, c in e[4].items():  # a side writing two values here writes no one constant
            m[4][side] = c if m[4].get(side, c) == c else None
        for role in (_W, _R, _A):
            for side, ins in e[role].items():
                m[role].setdefault(side, ins)
    if len(by) == len(entries):
        return entries
    for m in by.values():  # keep side order (the earliest sides are reported)
        for role in (_W, _R, _A):
            m[role] = dict(sorted(m[role].items(), key=lambda kv: _order(kv[0])))
    return list(by.values())


def _order(side):
    return (0, side) if isinstance(side, int) else (1, str(side))


_PAIRS = ((_W, _W), (_W, _R), (_W, _A), (_R, _W), (_A, _W), (_A, _R), (_R, _A))


def _conflict(e1, e2, replicas: bool = False):
    """Two sides, one from each entry, in a racing pair of roles: ((side, role, ins) x 2)."""
    best = None
    same = {e1[4].get(s) for s in e1[_W]} | {e2[4].get(s) for s in e2[_W]}
    for ra, rb in _PAIRS:
        x, y = e1[ra], e2[rb]
        if not x or not y or (ra == rb == _W and len(same) == 1 and None not in same):
            continue
        got = _pick(x, y)
        if got is not None:
            i, j = got
            if replicas and ra == rb == _W and x[i].source == y[j].source:
                continue  # identical programs writing identical values
            cand = ((i, ra, x[i]), (j, rb, y[j]))
            if best is None or (min(i, j), max(i, j)) < (min(best[0][0], best[1][0]),
                                                         max(best[0][0], best[1][0])):
                best = cand
    if best is None:
        return None
    return best + (_overlap(e1[0], e2[0]),)


def _constant(ins, consts: dict):
    """The one constant ``ins`` writes ((value, dtypes...) of a memset, or of a plain copy of a
    region a memset filled), else None; updates ``consts`` (tensor id -> (constant, region))."""
    c = None
    if ins.opcode == "memset":
        c = (ins.attr("value"),)
    elif ins.opcode in ("dma_copy", "tensor_copy") and len(ins.reads) == 1:
        r = ins.reads[0]
        got = consts.get(r.tensor)
        if got is not None and got[1].partition <= r.partition and got[1].start <= r.start and \
                r.partition + r.partitions <= got[1].partition + got[1].partitions and \
                r.stop <= got[1].stop and not r.indirect:
            c = got[0]
    for w in ins.writes:
        if c is None:
            consts.pop(w.tensor, None)
        else:
            consts[w.tensor] = (c + (w.dtype,), w)
    return None if c is None or not ins.writes else c + (ins.writes[0].dtype,)


def _pick(x: dict, y: dict) -> Optional[tuple]:
    """Two different sides, one from each (the earliest ones: dicts keep side order)."""
    i0 = next(iter(x))
    for j in y:
        if j != i0:
            return i0, j
    for i in x:       # y holds i0 only
        if i != i0:
            return i, i0
    return None


def _overlap(a, b) -> Tuple[str, str, str]:
    p0, p1 = max(a.partition, b.partition), min(a.partition + a.partitions,
                                                 b.partition + b.partitions)
    s0, s1 = max(a.start, b.start), min(a.stop, b.stop)
    dim = "rows" if a.memory == "hbm" else "partitions"
    return (a.name, a.memory, f"{dim} [{p0}, {p1}) bytes [{s0}, {s1})")


def _finding(got, rule: str, what: str, label) -> RaceFinding:
    (i, ra, ia), (j, rb, ib), (name, memory, overlap) = got
    a, b = (i, ra, ia), (j, rb, ib)
    # the writing side first (where the report points); between two writers the earlier side
    if a[1] != _W and b[1] == _W:
        a, b = b, a
    elif a[1] == b[1] and b[0] < a[0]:
        a, b = b, a
    return RaceFinding(rule=rule, what=what, tensor=name, memory=memory, overlap=overlap,
                       first=(label(a[0]), _ROLE[a[1]], a[2].source),
                       second=(label(b[0]), _ROLE[b[1]], b[2].source))
