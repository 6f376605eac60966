"""Loop fast-forward for timing-only runs: trace a few iterations of a loop, synthesize the rest.

Legacy NKI traces the body of an ``affine_range`` / ``sequential_range`` loop once: the body's
Python runs once and the compiler repeats the instructions with addresses that move with the loop
index.  In timing-only mode (no values to compute) trnsim does the same where it can prove the
body is regular: it runs iterations 0, 1 and 2, and if they issue the same instructions (same
engines, opcodes, shapes, dtypes, attributes and source lines) with every region's partition and
byte offsets moving by a constant step, and every tile allocated in the body allocated the same way,
it runs the last iteration for real (edge tiles, masks and out-of-bounds checks happen there) and
synthesizes iterations 3 .. n-2 as a ``LoopBlock``.  If the last iteration is not the one the
step predicts, the middle iterations run for real as well (and the trace is put back in program
order).  Where iterations 0-2 are not regular, iteration 0 may be a prologue the others skip
(e.g. it makes the partition-broadcast copy of a loop-invariant row that later iterations
share): iterations 1-3 are then tried the same way.  Errors raised by affine accesses are found
at the end points, since an affine bound is extreme at the first or last iteration.

Set ``TRNSIM_FAST_FORWARD=0`` to run every iteration; ``=all`` also fast-forwards the new ``nki``
API's loops, which are Python unrolls (a body whose Python side effects matter, e.g. appending tiles
to a list used after the loop, must not be fast-forwarded).
"""
from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

from . import storage as _storage
from ...ir import loops
from ...ir.trace import Instruction, InstructionList, LoopBlock, peek_synthetic_id


class Rerun(Exception):
    """Raised when a fast-forwarded run cannot give a complete answer; the launcher runs the
    kernel again with every iteration traced."""


# iterations run for real before the rest is synthesized (0, 1, 2) plus the last one
_PROBE = 3
_MIN_ITERATIONS = _PROBE + 2


class _Snap:
    __slots__ = ("pos", "sid", "synth", "hbm")

    def __init__(self, ctx):
        self.pos = len(ctx.trace.instructions)
        self.sid = next(_storage._ids)  # consuming one id is harmless; later ids are larger
        self.synth = peek_synthetic_id()
        self.hbm = ctx.hbm_used

    def is_local(self, tensor: int) -> bool:
        """Was this tensor allocated after the snapshot (inside the iteration)?"""
        if tensor > 0:
            return tensor > self.sid
        return -tensor >= self.synth


def enabled(ctx) -> bool:
    """Whether loops of this kernel instance may be fast-forwarded (timing-only runs)."""
    return ctx is not None and not ctx.numerics and ctx.options.fast_forward != "off"


def loop(ctx, r: range, on_iteration) -> Iterator[int]:
    """Iterate ``r`` for the kernel running in ``ctx``, fast-forwarding when the body is regular.
    ``on_iteration(k)`` is told the position of each iteration that runs."""
    n = len(r)
    if n < _MIN_ITERATIONS:
        for k in range(n):
            on_iteration(k)
            yield r[k]
        return
    snaps: List[_Snap] = []
    borns: List[list] = []   # weakrefs of the storages iterations 0 and 1 allocate
    for k in range(_PROBE):
        yield from _probe(ctx, r, k, on_iteration, snaps, borns)
    s = 0  # the iteration the template is taken from
    plan = _regular(ctx, snaps, borns, s)
    if plan is None and n >= _MIN_ITERATIONS + 1:
        # iteration 0 may be a prologue the others skip (e.g. it makes the partition-broadcast
        # copy of a loop-invariant row that later iterations share): try iterations 1, 2, 3
        yield from _probe(ctx, r, _PROBE, on_iteration, snaps, borns)
        s = 1
        plan = _regular(ctx, snaps, borns, s)
    first = _PROBE + s  # the first iteration not run yet
    if plan is None:
        for k in range(first, n):
            on_iteration(k)
            yield r[k]
        return
    template, deltas, nlocal = plan
    ins_list: InstructionList = ctx.trace.instructions
    # the last iteration, then (when it differs from the prediction) the one before it: a loop
    # whose last iteration alone is special (a tile crossing a causal diagonal) keeps the rest
    # synthesized.  ``ends``: (start, iteration) of each, in the order they ran
    ends: List[Tuple[int, int]] = []
    for k in (n - 1, n - 2):
        if ends and k <= first:
            break  # nothing left between the probes and this iteration to synthesize
        snap = _Snap(ctx)
        on_iteration(k)
        yield r[k]
        ends.append((snap.pos, k))
        seg = ins_list[snap.pos:len(ins_list)]
        if ctx.hbm_used == snap.hbm and predicts(template, deltas, k - s, seg, snap.sid,
                                                 snap.synth):
            # iterations first .. k-1 are the template (iteration s) moved by their distance
            _program_order(ctx, ends)
            block = LoopBlock(template, _PROBE, k - first, deltas, nlocal)
            pos = ends[0][0]
            end = len(ins_list)
            ins_list.insert_block(pos, block)
            _remap(ctx, [(pos, end, block.n)])
            return
    # the end iterations differ from the prediction: run the middle ones for real too
    mid = len(ins_list)
    for k in range(first, ends[-1][1]):
        on_iteration(k)
        yield r[k]
    _program_order(ctx, ends + [(mid, -1)])


def _program_order(ctx, pieces: List[Tuple[int, int]]) -> None:
    """Put iterations that ran out of order back in program order: ``pieces`` are (start,
    iteration) in the order they were recorded, each running to the next one's start (the last
    to the trace's end); iteration -1 is the run of middle iterations, which comes first."""
    ins_list = ctx.trace.instructions
    end = len(ins_list)
    bounds = [p for p, _ in pieces] + [end]
    spans = [(bounds[i], bounds[i + 1], k) for i, (_, k) in enumerate(pieces)
             if bounds[i + 1] > bounds[i]]
    want = sorted(spans, key=lambda x: x[2])
    if [x[2] for x in want] == [x[2] for x in spans]:
        return
    windows, at = [], bounds[0]
    for lo, hi, _ in want:
        windows.append((lo, hi, at - lo))
        at += hi - lo
    order = list(spans)  # current layout, moved piece by piece to the end in program order
    for x in want:
        i = order.index(x)
        if i == len(order) - 1:
            continue  # already at the end
        lo = bounds[0] + sum(y[1] - y[0] for y in order[:i])
        ins_list.move_to_end(lo, lo + x[1] - x[0])
        order.append(order.pop(i))
    _remap(ctx, [w for w in windows if w[2]])


def _probe(ctx, r: range, k: int, on_iteration, snaps: List[_Snap], borns: List[list]):
    """Run iteration ``k`` for real, with a snapshot before it; iterations 0 and 1 also collect
    weakrefs of the storages they allocate (see ``_regular``)."""
    snaps.append(_Snap(ctx))
    on_iteration(k)
    if k > 1:
        yield r[k]
        return
    born: list = []
    borns.append(born)
    ctx.ff_watch.append(born)
    try:
        yield r[k]
    finally:
        w = ctx.ff_watch
        del w[next(j for j in range(len(w) - 1, -1, -1) if w[j] is born)]


def _regular(ctx, snaps: List[_Snap], borns: List[list], s: int):
    """``_plan`` for iterations s, s+1, s+2 (all run), or None.  A tile of iteration s still
    alive two iterations later escaped into Python state (e.g. a list of tiles used after the
    loop), or is kept by trnsim itself (a shared broadcast copy): not interchangeable."""
    if any(ref() is not None for ref in borns[s]):
        return None
    return _plan(ctx, snaps[s:s + _PROBE], _Snap(ctx))


def _remap(ctx, windows: List[Tuple[int, int, int]]) -> None:
    """Record an index remapping and apply it to the liveness intervals held by index."""
    ctx.trace.add_remap(windows)

    def f(i: int) -> int:
        for lo, hi, d in windows:
            if lo <= i < hi:
                return i + d
        return i

    low = min(w[0] for w in windows) if windows else 0
    for acc in (ctx.sbuf, ctx.psum):
        for iv in acc.intervals.values():
            # most tiles end before every window: nothing to move (no call per index)
            if iv[1] >= low:
                iv[0] = f(iv[0])
                iv[1] = f(iv[1])
        if acc.accesses:
            for lst in acc.accesses.values():
                lst[:] = [(f(p), w) for p, w in lst]


_SAME_FIELDS = slice(5, 12)   # partitions, free, dtype_in, dtype_out, attrs, source, core


def _same_shape(a: Instruction, b: Instruction) -> bool:
    try:
        return a.engine == b.engine and a.opcode == b.opcode and \
            a[_SAME_FIELDS] == b[_SAME_FIELDS] and len(a.reads) == len(b.reads) and \
            len(a.writes) == len(b.writes)
    except (ValueError, TypeError):  # attrs holding arrays: not comparable, so not regular
        return False


def _plan(ctx, snaps: Sequence[_Snap], end: _Snap):
    """Template, per-region deltas and local-tile count if iterations 0..2 are regular."""
    if any(s.hbm != end.hbm for s in snaps):
        return None  # the body allocates HBM: not synthesized (capacity accounting)
    bounds = [s.pos for s in snaps] + [end.pos]
    ins_list = ctx.trace.instructions
    L = bounds[1] - bounds[0]
    if L == 0 or bounds[2] - bounds[1] != L or bounds[3] - bounds[2] != L:
        return None
    segs = [ins_list[bounds[i]:bounds[i + 1]] for i in range(3)]
    got = compare(segs, tuple(s.sid for s in snaps), tuple(s.synth for s in snaps))
    return None if got is None else (segs[0], got[0], got[1])


def compare(segs: Sequence[list], sids: Sequence[int], synths: Sequence[int]):
    """(per-region deltas, local-tile count) if the three recorded iterations ``segs`` are
    regular, else None; ``sids`` / ``synths``: their snapshots' storage and synthetic ids (see
    ``_Snap.is_local``).  The C kernel (ir/loops.py) when on, else ``compare_py``."""
    mod = loops.module()
    if mod is not None:
        try:
            return mod.plan(*segs, tuple(sids), tuple(synths))
        except ValueError:  # records the C comparison does not handle: the reference
            pass
    return compare_py(segs, sids, synths)


def compare_py(segs: Sequence[list], sids: Sequence[int], synths: Sequence[int]):
    """The reference of ``compare``."""
    r0, r1, r2 = [{}, {}, {}]
    (sid0, sid1, sid2), (sy0, sy1, sy2) = sids, synths
    deltas = []
    # regions are compared by field position (Region: memory 0, tensor 1, partition 3,
    # partitions 4, start 5, stop 6, elements 7, dtype 8, contiguous 9, indirect 10): this loop
    # runs once per region of three iterations of every probed loop
    for a, b, c in zip(*segs):
        if not (_same_shape(a, b) and _same_shape(b, c)):
            return None
        d = []
        for x, y, z in zip(a[3] + a[4], b[3] + b[4], c[3] + c[4]):
            if not (x[0] == y[0] == z[0] and x[4] == y[4] == z[4] and x[7:] == y[7:] == z[7:]):
                return None
            dp, ds, de = y[3] - x[3], y[5] - x[5], y[6] - x[6]
            if z[3] - y[3] != dp or z[5] - y[5] != ds or z[6] - y[6] != de:
                return None
            # the tensor's rank: -1 for one every iteration shares; the order of first use for
            # one each iteration allocates anew (the same in every iteration); else not regular
            # (e.g. a tile carried from one iteration into the next).  Locality is _Snap.is_local.
            xt, yt, zt = x[1], y[1], z[1]
            lx = xt > sid0 if xt > 0 else -xt >= sy0
            ly = yt > sid1 if yt > 0 else -yt >= sy1
            lz = zt > sid2 if zt > 0 else -zt >= sy2
            if not (lx or ly or lz):
                if not xt == yt == zt:
                    return None
                rank = -1
            elif not (lx and ly and lz):
                return None
            else:
                rank = r0.setdefault(xt, len(r0))
                if r1.setdefault(yt, len(r1)) != rank or r2.setdefault(zt, len(r2)) != rank:
                    return None
            d.append((dp, ds, de, rank))
        deltas.append(tuple(d))
    return deltas, len(r0)


def predicts(template, deltas, k: int, seg: Sequence[Instruction], sid: int, synth: int) -> bool:
    """Is ``seg`` (iteration ``k``, recorded after a snapshot with storage id ``sid`` and
    synthetic id ``synth``) what the template and deltas predict?  The C kernel (ir/loops.py)
    when on, else ``predicts_py``."""
    if len(seg) != len(template):
        return False
    mod = loops.module()
    if mod is not None:
        try:
            return mod.predicts(template, deltas, k, seg, sid, synth)
        except ValueError:  # records the C comparison does not handle: the reference
            pass
    return predicts_py(template, deltas, k, seg, sid, synth)


def predicts_py(template, deltas, k: int, seg: Sequence[Instruction], sid: int, synth: int) -> bool:
    """The reference of ``predicts``."""
    if len(seg) != len(template):
        return False
    ranks: dict = {}
    for a, b, d in zip(template, seg, deltas):
        if not _same_shape(a, b):
            return False
        for x, y, (dp, ds, de, rank) in zip(a[3] + a[4], b[3] + b[4], d):
            # Region fields by position, as in _plan
            if not (x[0] == y[0] and x[4] == y[4] and x[7:] == y[7:] and y[3] == x[3] + k * dp
                    and y[5] == x[5] + k * ds and y[6] == x[6] + k * de):
                return False
            if rank < 0:
                if y[1] != x[1]:
                    return False
            elif not (y[1] > sid if y[1] > 0 else -y[1] >= synth) or \
                    ranks.setdefault(y[1], len(ranks)) != rank:
                return False
    return True
