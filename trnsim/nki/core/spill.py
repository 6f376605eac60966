"""SBUF spills: when automatically allocated tiles do not fit, the compiler stores some to HBM and
reloads them before their next use (hardware.md: "When SBUF overflows, the compiler inserts
spill/reload DMAs to HBM (extra traffic)"; the fused Mamba tutorial profiles them as
qSyncSpillReload / qVectorSpillReload queues, with SBUF fragmented well below full).

The compiler's allocator and choice of victims are not documented.  trnsim cuts each tile at the
byte bounds its instructions touch (``split_pieces``: an instruction reading a 2 KiB slice of a
128 KiB row needs only that piece back) and walks the pieces' accesses in program order over one
partition's byte addresses (a new tile takes one contiguous block; a reloaded piece any run):

- a tile takes free bytes as the placement policy's free list gives them (placement.py: least
  recently released first; never-used bytes oldest);
- when no contiguous free run holds it (too much live, or fragmentation), it takes the window of
  ``bytes`` bytes whose resident tiles are cheapest to evict (``victim_cost``): each victim costs
  its DMAs (stored if written since its last load, and reloaded), each its bytes plus the DMA's
  fixed cost in bytes (derived from ``[vN.timing.dma]``), divided by how far away its next use is
  (Belady's farthest-next-use rule, weighted by size, so a 2 KiB request evicts 2 KiB, not a
  128 KiB tile), and weighted up when it was used just before (1 + 1 / instructions since: the
  requester waits for that use).  Tiles used by the same instruction are never
  victims; with ``[vN.sbuf] loop_buffers`` > 1 a tile stays resident past its last use until the
  tile its source line allocates that many times later is done (as if iterations overlapped),
  and such a held copy gives way (no DMA: its values are dead) only when nothing else can;
- a victim's store goes right after its last use before the eviction, and also writes the bytes
  of the requesting tile it hands over (a token region), so the requester's first access of those
  bytes waits for the store: the semaphore wait the tutorial's profile shows; a reload reads the
  HBM scratch its store wrote, so it waits for that store.

The DMAs are inserted into the trace (``attrs`` ``spill``) and timed like any other transfer.
Under ``placement = "reuse_lru"`` the addresses of tiles never evicted become the physical map of
the timing model (so a tile that takes released bytes waits for their last reader); evicted tiles
keep private storage (a reloaded copy may land elsewhere), their waits are the token regions.
A tile no eviction can make room for (one instruction's tiles exceed the partition) stays resident
without an address, counted in ``unresolved``.  The instruction that takes over an evicted
victim's bytes also writes them in the trace (``handover_regions``), so it waits for the victim's
last reader, whether a store was needed or the victim was clean (its HBM copy current): a store
waits only for the victim's last write, so a token alone would let the requester's first write
land before that read.  Adjacent pieces of a tile moved at one position go as one DMA.  A block
tensor's blocks are pieces allocated one by one, each from its own first use (pieces.py).
"""
from __future__ import annotations

import bisect
import heapq
from typing import Dict, List, NamedTuple, Optional, Tuple

from ...ir.trace import Instruction, Region, reserve_synthetic_ids
from .memory import new_region_id
from .pieces import split_pieces
from .placement import FreeList

_NEVER = 1 << 62   # the next use of a tile that has none
COPY_SUFFIX = "_pbcast"   # the name suffix of a partition broadcast's copy (broadcast_lowering)


class Move(NamedTuple):
    """One spill DMA: inserted before position ``pos``; ``token``: (requesting tile, byte lo, byte
    hi) of the bytes a store hands over (None for loads)."""
    pos: int
    kind: str      # 'store' | 'load'
    tile: int
    token: Optional[Tuple[int, int, int]] = None


class Plan:
    """Spill stores and reloads in trace order, their traffic, and where tiles were placed."""

    def __init__(self):
        self.moves: List[Move] = []
        self.bytes_per_partition = 0
        self.unresolved = 0   # bytes per partition over capacity that no eviction could free
        self.offsets: Dict[int, int] = {}   # tile -> byte offset, for tiles never evicted
        self.evicted: set = set()
        # (position, victim): the instruction at position takes over bytes of an evicted victim
        # (stored or clean), so it waits for the victim's last reader (``handover_regions``)
        self.handovers: List[Tuple[int, int]] = []


def plan_spills(intervals: Dict[int, list], accesses: Dict[int, list], capacity: int,
                reserved: int, overhead: float = 0.0, hold: Optional[Dict[int, int]] = None,
                blocks: Optional[Dict[int, List[int]]] = None) -> Plan:
    """``intervals``: tile -> [first, last, bytes per partition, ...]; ``accesses``: tile ->
    sorted (position, is_write) of every instruction touching it.  Bytes [0, ``reserved``) are
    manual placements; automatic tiles live in [reserved, capacity).  ``overhead``: a spill
    DMA's fixed cost in bytes per partition (``dma_overhead_bytes``); ``hold``: tile -> the
    position its bytes stay taken until, past its last use (``held_until``), never a victim;
    ``blocks``: first piece -> the pieces of one tile (``split_pieces``), allocated side by side
    when the tile is made (a reload may put a piece anywhere)."""
    plan = Plan()
    hold = hold or {}
    blocks = blocks or {}
    times: Dict[int, List[int]] = {}
    writes: Dict[int, List[int]] = {}
    events: List[Tuple[int, int]] = []
    for sid, iv in intervals.items():
        acc = accesses.get(sid, [])
        t = sorted({iv[0]} | {p for p, _ in acc})
        times[sid] = t
        writes[sid] = sorted(p for p, w in acc if w)
        events.extend((p, sid) for p in t)
    events.sort()
    st = _State(reserved, capacity)
    spilled: set = set()
    dirty: Dict[int, bool] = {}
    ends: List[Tuple[int, int]] = []   # heap of (last use, tile) of resident tiles
    i, n = 0, len(events)
    while i < n:
        p = events[i][0]
        group = []
        while i < n and events[i][0] == p:
            group.append(events[i][1])
            i += 1
        while ends and ends[0][0] < p:   # tiles whose last use is behind us leave SBUF
            _, sid = heapq.heappop(ends)
            if sid in st.where:
                st.release(sid, p)
            st.over.discard(sid)
        here = set(group)
        for sid in group:
            if sid in st.where or sid in st.over:
                continue
            units = blocks.get(sid, ()) if sid not in st.first else ()
            if units:   # a new tile: all its pieces in one contiguous block
                if _place(st, units, p, here, times, dirty, intervals, plan, spilled, overhead):
                    for u in units:
                        heapq.heappush(ends, (max(intervals[u][1], hold.get(u, -1)), u))
                    continue
            need = intervals[sid][2]
            if sid in spilled:
                plan.moves.append(Move(p, "load", sid))
                plan.bytes_per_partition += need
                spilled.discard(sid)
                dirty[sid] = False
            else:
                dirty[sid] = True   # a new tile holds values only SBUF has once it is written
            at = st.free.take(need)
            if at is None:
                at = _evict(st, sid, need, p, here, times, dirty, intervals, plan, spilled,
                            overhead)
            if at is None:   # no window without a tile this instruction uses: over capacity
                # it stays resident without an address (as over-full SBUF would hold it) rather
                # than be fetched again at each access
                plan.unresolved = max(plan.unresolved, need)
                st.over.add(sid)
            else:
                st.where[sid] = (at, at + need)
                st.first.setdefault(sid, at)
            heapq.heappush(ends, (max(intervals[sid][1], hold.get(sid, -1)), sid))
        for sid in group:
            if (sid in st.where or sid in st.over) and _at(writes[sid], p):
                dirty[sid] = True
    plan.moves.sort(key=lambda m: (m.pos, 0 if m.kind == "store" else 1))
    plan.offsets = {sid: lo for sid, lo in st.first.items() if sid not in plan.evicted}
    return plan


def _place(st: "_State", units: List[int], p: int, here: set, times, dirty, intervals,
           plan: Plan, spilled: set, overhead: float) -> bool:
    """Give the pieces ``units`` of a new tile one contiguous block (evicting if needed); False
    when none can be made (the pieces then go one by one)."""
    need = sum(intervals[u][2] for u in units)
    at = st.free.take(need)
    if at is None:
        at = _evict(st, units[0], need, p, here, times, dirty, intervals, plan, spilled, overhead)
    if at is None:
        return False
    for u in units:
        b = intervals[u][2]
        st.where[u] = (at, at + b)
        st.first.setdefault(u, at)
        dirty[u] = True
        at += b
    return True


class _State:
    """Resident tiles' addresses and the free list of one partition."""

    def __init__(self, reserved: int, capacity: int):
        self.free = FreeList(reserved, capacity)
        self.where: Dict[int, Tuple[int, int]] = {}   # resident tile -> [lo, hi)
        self.over: set = set()   # resident tiles no eviction could make room for (unresolved)
        self.first: Dict[int, int] = {}               # tile -> its first address
        self.lo, self.hi = reserved, capacity

    def release(self, sid: int, when: int) -> None:
        lo, hi = self.where.pop(sid)
        self.free.release(lo, hi, when)

    def segments(self) -> List[Tuple[int, int, Optional[int]]]:
        """[lo, hi, resident tile or None] covering the partition, in address order."""
        segs = [(lo, hi, sid) for sid, (lo, hi) in self.where.items()]
        segs += [(r[0], r[1], None) for r in self.free.ranges]
        segs.sort()
        return segs


def _evict(st: _State, sid: int, need: int, p: int, here: set, times, dirty, intervals,
           plan: Plan, spilled: set, overhead: float) -> Optional[int]:
    """Choose the cheapest window of ``need`` bytes, evict its residents, give it to ``sid``."""
    segs = st.segments()
    starts = [s[0] for s in segs]
    cost_of: Dict[int, float] = {}

    def cost(v: int) -> float:
        c = cost_of.get(v)
        if c is None:
            t = times[v]
            j = bisect.bisect_right(t, p)
            nxt = t[j] if j < len(t) else _NEVER
            c = cost_of[v] = victim_cost(intervals[v][2], dirty.get(v, True), nxt - p, overhead,
                                         p - t[j - 1])
        return c

    best = None
    # candidate windows start at a segment's start or end at a segment's end: a cheapest window
    # can always slide to one of these without taking in another victim
    cands = sorted({s[0] for s in segs} | {s[1] - need for s in segs})
    # held copies (past their last use, loop_buffers) give way only when nothing else can: their
    # values are dead, so dropping one moves no data but ends the overlap it stood for
    for give_way in (False, True):
        for lo in cands:
            hi = lo + need
            if lo < st.lo or hi > st.hi:
                continue
            k = max(0, bisect.bisect_right(starts, lo) - 1)
            victims, total, ok = [], 0.0, True
            while k < len(segs) and segs[k][0] < hi:
                v = segs[k][2]
                if v is not None and segs[k][1] > lo:
                    if v in here or (intervals[v][1] < p and not give_way):
                        ok = False
                        break
                    victims.append(v)
                    total += 0.0 if intervals[v][1] < p else cost(v)
                k += 1
            if ok and (best is None or total < best[0]):
                best = (total, lo, victims)
        if best is not None:
            break
    if best is None:
        return None
    _, lo, victims = best
    for v in victims:
        vlo, vhi = st.where[v]
        st.release(v, p)
        if intervals[v][1] < p:   # a held copy: dead values, nothing to store or reload
            continue
        plan.evicted.add(v)
        spilled.add(v)
        plan.handovers.append((p, v))
        if dirty.get(v, True):
            t = times[v]
            prev = t[bisect.bisect_left(t, p) - 1]   # its last use before p
            token = (sid, max(vlo, lo) - lo, min(vhi, lo + need) - lo)
            plan.moves.append(Move(prev + 1, "store", v, token))
            plan.bytes_per_partition += intervals[v][2]
    st.free.take_at(lo, need)
    return lo


def victim_cost(nbytes: int, dirty: bool, distance: int, overhead: float = 0.0,
                since: int = 1 << 62) -> float:
    """What evicting a tile costs: its DMAs (a store if it was written since its last load,
    then the reload), each worth its bytes per partition plus ``overhead`` (a DMA's fixed cost in
    bytes), per instruction of ``distance`` to its next use; times 1 + 1/``since`` (instructions
    since its last use), because the requester waits for that use (``handover_regions``)."""
    return (2 if dirty else 1) * (nbytes + overhead) / distance * (1 + 1 / since)


def _at(w: List[int], p: int) -> bool:
    j = bisect.bisect_left(w, p)
    return j < len(w) and w[j] == p


def spill_instructions(plan: Plan, tiles: Dict[int, Tuple[str, int, int, object]], core: int,
                       spans: Optional[Dict[int, Tuple[int, int, int]]] = None
                       ) -> List[Tuple[int, Instruction]]:
    """The DMA instructions of a plan: ``tiles``: tile id -> (name, partitions, bytes per
    partition, source location); ``spans``: plan unit -> (tile, byte lo, byte hi) where the plan
    moves pieces of tiles (``split_pieces``), else units are whole tiles.  Each spilled tile gets
    its own HBM scratch (a synthetic allocation); a store's second write is the token region of
    the tile it hands its bytes to (no extra cost: DMA cost is taken from the first read and
    write)."""
    def span(u):
        return spans[u] if spans is not None else (u, 0, tiles[u][2])

    # adjacent pieces of one tile moved at one position go as one DMA
    groups: List[list] = []
    for mv in sorted(plan.moves, key=lambda m: (m.pos, m.kind != "store", span(m.tile))):
        sid, b0, b1 = span(mv.tile)
        g = groups[-1] if groups else None
        if g is not None and g[:3] == [mv.pos, mv.kind, sid] and g[4] == b0:
            g[4] = b1
            g[5].append(mv.token)
        else:
            groups.append([mv.pos, mv.kind, sid, b0, b1, [mv.token]])
    scratch: Dict[int, int] = {}
    out = []
    for pos, kind, sid, b0, b1, tokens in groups:
        name, parts, _, loc = tiles[sid]
        if sid not in scratch:
            scratch[sid] = -reserve_synthetic_ids(1)
        w = b1 - b0
        sb = Region("sbuf", sid, name, 0, parts, b0, b1, parts * w, "uint8", w)
        hb = Region("hbm", scratch[sid], f"{name}.spill", 0, 1, parts * b0, parts * b1, parts * w,
                    "uint8", parts * w)
        if kind == "store":
            reads, writes = (sb,), (hb,)
            for tok in tokens:
                if tok is not None and tok[2] > tok[1]:
                    rq, r0, _ = span(tok[0])
                    rname, rparts, _, _ = tiles[rq]
                    lo, hi = r0 + tok[1], r0 + tok[2]
                    writes += (Region("sbuf", rq, rname, 0, rparts, lo, hi, rparts * (hi - lo),
                                      "uint8", hi - lo),)
        else:
            reads, writes = (hb,), (sb,)
        out.append((pos, Instruction(0, "dma", "dma_copy", reads, writes, parts, w, "uint8",
                                     "uint8", (("spill", kind),), loc, core)))
    return out


def handover_regions(plan: Plan, tiles: Dict[int, Tuple[str, int, int, object]], trace,
                     spans: Optional[Dict[int, Tuple[int, int, int]]] = None) -> int:
    """Add to the instruction that takes over an evicted victim's bytes a write of those bytes
    (the victim's piece), so it waits for the victim's last reader and writer (write-after-read:
    physically it writes the same bytes, which the timing model keeps apart since an evicted tile
    keeps private storage).  A marker region: one element of a dtype the instruction already has,
    so no cost rule sees it.  Returns how many instructions were changed."""
    def span(u):
        return spans[u] if spans is not None else (u, 0, tiles[u][2])

    at: Dict[int, List[Tuple[int, int, int]]] = {}
    for pos, (sid, b0, b1) in sorted((pos, span(v)) for pos, v in plan.handovers):
        lst = at.setdefault(pos, [])
        if lst and lst[-1][0] == sid and lst[-1][2] == b0:   # adjacent pieces of one tile
            lst[-1] = (sid, lst[-1][1], b1)
        else:
            lst.append((sid, b0, b1))
    il = trace.instructions
    for pos, taken in at.items():
        ins = il[pos]
        dtype = next((r.dtype for r in ins.writes + ins.reads if r.memory == "sbuf"),
                     ins.dtype_out)
        extra = tuple(Region("sbuf", sid, tiles[sid][0], 0, tiles[sid][1], b0, b1, 1, dtype,
                             b1 - b0) for sid, b0, b1 in taken)
        il[pos] = ins._replace(writes=ins.writes + extra)
    return len(at)


def _tile_ranges(trace, intervals: Dict[int, list]) -> Dict[int, list]:
    """Tile -> [(position, is_write, byte lo, byte hi)] of every SBUF region of its instructions."""
    out: Dict[int, list] = {}
    lo = min(iv[0] for iv in intervals.values())
    ins_list = trace.instructions
    for ins in ins_list.iter_range(lo, len(ins_list)):
        for regs, write in ((ins.reads, False), (ins.writes, True)):
            for r in regs:
                if r.memory == "sbuf" and r.tensor in intervals:
                    out.setdefault(r.tensor, []).append((ins.index, write, r.start, r.stop))
    return out


def held_until(intervals: Dict[int, list], depth: int) -> Dict[int, int]:
    """Tile -> the position its bytes stay taken until with ``depth`` copies per allocation site
    (``[vN.sbuf] loop_buffers``): the last use of the tile its source line allocates ``depth - 1``
    times later (as if that many loop iterations overlapped); only tiles it extends are listed."""
    if depth <= 1:
        return {}
    sites: Dict[tuple, List[Tuple[int, int]]] = {}
    for sid, iv in intervals.items():
        if iv[4] is not None:
            # a partition broadcast's copy carries its consumer's line: a site of its own, not
            # interleaved with the tiles that line's instruction allocates (broadcast_lowering)
            copy = isinstance(iv[3], str) and iv[3].endswith(COPY_SUFFIX)
            sites.setdefault((iv[4].file, iv[4].line, copy), []).append((iv[0], sid))
    out: Dict[int, int] = {}
    for lst in sites.values():
        lst.sort()
        lasts = [intervals[sid][1] for _, sid in lst]
        for k, (_, sid) in enumerate(lst):
            h = max(lasts[k:k + depth])
            if h > lasts[k]:
                out[sid] = h
    return out


def needs_spill_plan(acc, trace) -> Optional[str]:
    """Why accountant ``acc``'s tiles need spills although their single-copy live bytes fit:
    'loop_buffers' (the held copies overflow), 'fragmentation' (under reuse_lru, a tile finds no
    contiguous free run), or None.  Fast-forwarded traces are traced again (Rerun) when
    loop_buffers > 1, since synthesized tiles carry no allocation site.  A placement that fits
    single-copy ranges is kept in ``acc.placed`` for ``Accountant.place`` (computed once)."""
    from .placement import place_lru, synthesized_ranges
    from .liveness import sweep_peak
    spec = acc.spec
    ranges = [(iv[0], iv[1], iv[2], sid) for sid, iv in acc.intervals.items()]
    if spec.loop_buffers > 1:
        if trace.instructions.blocks:
            from .fastforward import Rerun
            raise Rerun()
        hold = held_until(acc.intervals, spec.loop_buffers)
        held = [(f, max(last, hold.get(sid, last)), b, sid) for f, last, b, sid in ranges]
        if sweep_peak(held, acc.manual_end)[0] > acc.capacity:
            return "loop_buffers"
        ranges = held
    if spec.placement != "reuse_lru":
        return None
    if trace.instructions.blocks:
        ranges += [(*iv, sid) for sid, iv in
                   synthesized_ranges(trace.instructions, acc.intervals).items()]
    got = place_lru(ranges, acc.capacity, acc.manual_end)
    if len(got) < len(ranges):
        return "fragmentation"
    if spec.loop_buffers <= 1:   # the single-copy ranges Accountant.place would place again
        acc.placed = got
    return None


def dma_overhead_bytes(dma) -> float:
    """The bytes per partition a DMA moves in the time of its fixed cost (``dma``: a core's
    DmaTiming): fixed latency x one engine's rate / the partitions each engine serves."""
    return dma.fixed_latency_ns * dma.engine_bytes_per_ns / dma.partitions_per_engine


def insert_spills(acc, trace, core: int, spec) -> Plan:
    """Plan the spills of accountant ``acc``'s tiles (``spec``: the CoreSpec), by pieces
    (``split_pieces``), insert their DMAs into ``trace`` and record the traffic (and, under
    ``reuse_lru``, the addresses of tiles no piece of which was evicted) in its meta."""
    placement = spec.sbuf.placement
    p_iv, p_acc, spans = split_pieces(acc.intervals, _tile_ranges(trace, acc.intervals),
                                      acc.blocks)
    blocks: Dict[int, List[int]] = {}
    for u, (sid, _, _) in spans.items():   # piece ids of a tile are consecutive, in byte order
        if sid not in acc.blocks:   # a block tensor's blocks are allocated one by one
            blocks.setdefault(sid, []).append(u)
    hold = held_until(acc.intervals, spec.sbuf.loop_buffers)
    p_hold = {u: hold[sid] for u, (sid, _, _) in spans.items() if sid in hold}
    plan = plan_spills(p_iv, p_acc, acc.capacity, acc.manual_end,
                       dma_overhead_bytes(spec.timing.dma), p_hold,
                       {us[0]: us for us in blocks.values() if len(us) > 1})
    tiles = {sid: (iv[3], acc.parts.get(sid, 1), iv[2], iv[4]) for sid, iv in acc.intervals.items()}
    moves = spill_instructions(plan, tiles, core, spans)
    handover_regions(plan, tiles, trace, spans)   # positions before the moves are inserted
    trace.instructions.insert_many(moves)
    meta = trace.meta
    meta["sbuf_spill_dmas"] = meta.get("sbuf_spill_dmas", 0) + len(moves)
    meta["sbuf_spill_traffic_bytes"] = meta.get("sbuf_spill_traffic_bytes", 0) + sum(
        ins.reads[0].elements for _, ins in moves)
    if placement == "reuse_lru":
        _record_placement(plan, spans, meta, new_region_id())
    return plan


def _record_placement(plan: Plan, spans, meta, phys: int) -> None:
    """A tile's address for the timing model where all its pieces stayed put, side by side."""
    base: Dict[int, int] = {}
    bad: set = set()
    for u, (sid, lo, _) in spans.items():
        at = plan.offsets.get(u)
        if at is None or base.setdefault(sid, at - lo) != at - lo:
            bad.add(sid)
    flat = meta.setdefault("sbuf_placement", [])
    for sid, b in base.items():
        if sid not in bad:
            flat += (sid, phys, b)
    meta["sbuf_placement_policy"] = "reuse_lru"
