"""Partition-dim operand broadcasts as the compiler executes them (issue 13: "broadcast operands").

``t.broadcast_to((P, F))`` of a [1, F] SBUF tile is a stride-0 view along the partition dim.  A
compute engine cannot read it as such: an SBUF/PSUM access pattern steps through partitions
contiguously [APS], so the broadcast is an instruction of its own.  NKI lowers it to
``nc_matmul(ones[1, P], x[1, F], is_stationary_onezero=True)`` into PSUM [ARCH2 "Partition
Broadcast"], "an extra TensorE instruction" [MAMBA], and the consumer reads the PSUM copy.

Only the trace changes: the consuming Vector/Scalar/GpSimd instruction still computes on the
view's values (bit-identical numerics under every policy), but its read region becomes the copy's,
so it waits for the inserted instruction(s).  The policy is data (``[vN.broadcast] partition``:
``tensor`` | ``dma`` | ``free``; cores.toml says why and when ``tensor`` falls back to ``dma``).
The copy is a tile of its memory: counted in PSUM (SBUF for a DMA copy) from the inserted
instruction to its last consumer, so the capacity check, the profile's occupancy over time and the
peak see it.  Where PSUM cannot hold it (the kernel's PSUM tiles plus the copies overflow, in the
order the PSUM check accepts), ``make_room`` turns the copies live at the overflow into the DMA
fallback before SBUF is checked: each chunk's matmul becomes a DMA of the same columns into SBUF,
and the consumers read the SBUF copy.

Consumers of the same view (same source bytes, shape and strides, same lowering) share one copy
while its source is unchanged, under ``[vN.broadcast] partition_reuse = "resident"``
(``nl.broadcast_to`` returns "a tile with the target shape" [nki.language docs]; they say no
more, cores.toml records the choice); ``none`` gives each consumer its own copy.
"""
from __future__ import annotations

import weakref
from typing import Dict, List, Tuple

from ...ir.trace import Region
from ...source import user_loc
from . import dtypes as dt
from . import storage as _storage
from .context import KernelContext, region
from .spill import COPY_SUFFIX
from .tensor import NkiTensor

OPCODE = "partition_broadcast"
# engines whose operands are resolved through access patterns (the Tensor engine's moving/stationary
# operands are contractions, DMA descriptors may repeat a partition: neither is lowered)
COMPUTE_ENGINES = frozenset(("vector", "scalar", "gpsimd"))
_PSUM_DTYPE = "float32"   # the matmul output dtype every generation has (cores.toml tensor.output_dtypes)


def is_partition_broadcast(t: NkiTensor, engine: str) -> bool:
    """Whether compute engine ``engine`` reading ``t`` needs a partition broadcast first (not
    when ``t`` is already a lowered view, whose region is its copy's)."""
    r = t._region
    return t._strides[0] == 0 and t._shape[0] > 1 and engine in COMPUTE_ENGINES and \
        (r is None or r.tensor == t._st.region_id)


def lowering(ctx: KernelContext, t: NkiTensor, engine: str) -> str:
    """How this broadcast is executed: "tensor", "dma" or "free" (the data's policy, with the
    fallbacks cores.toml [vN.broadcast] records)."""
    policy = ctx.spec.broadcast.partition
    if policy == "free" or t._st.memory != "sbuf" or t._gather is not None:
        return "free"  # a PSUM source: neither the PE nor a DMA reads PSUM
    if policy == "dma":
        return "dma"
    spec = ctx.spec
    fits = distinct_free(t) <= min(spec.access.max_free_elements_psum,
                                   spec.psum.bytes_per_partition // dt.as_dtype(_PSUM_DTYPE).itemsize)
    pe_dtype = dt.name(t._dtype) in spec.tensor.input_dtypes
    reads_psum = "r" in getattr(spec.engines, engine).psum
    return "tensor" if (fits and pe_dtype and reads_psum) else "dma"


def distinct_free(t: NkiTensor) -> int:
    """Elements per partition the broadcast copy holds: the free dims that are not stride 0."""
    n = 1
    for c, s in zip(t._shape[1:], t._strides[1:]):
        if s:
            n *= c
    return n


def _run(t: NkiTensor) -> int:
    """Innermost contiguous run, in elements, of the consumer's read of the (row-major) copy."""
    run = 1
    for c, s in zip(reversed(t._shape[1:]), reversed(t._strides[1:])):
        if c == 1:
            continue
        if not s:
            break
        run *= c
    return run


class Copy:
    """One broadcast copy of a kernel instance: its tile, where it is, what made it."""
    __slots__ = ("sid", "name", "P", "F", "memory", "row", "src_dtype", "src_isz", "loc", "made",
                 "epoch", "checked")

    def __init__(self, sid, name, P, F, memory, row, src_dtype, src_isz, loc, made, epoch):
        self.sid, self.name, self.P, self.F, self.memory = sid, name, P, F, memory
        self.row, self.src_dtype, self.src_isz, self.loc = row, src_dtype, src_isz, loc
        self.made = made      # indices of the instructions that wrote it (at remap ``epoch``)
        self.epoch = epoch
        self.checked = made[-1] + 1   # its source is known unwritten before this index

    def dtype_isz(self) -> Tuple[str, int]:
        """The copy's dtype and bytes per element where it lives."""
        if self.memory == "psum":
            return _PSUM_DTYPE, dt.as_dtype(_PSUM_DTYPE).itemsize
        return self.src_dtype, self.src_isz   # region bytes are storage bytes


class _Book:
    """A kernel instance's copies: all of them, and the shareable ones by view."""

    def __init__(self):
        self.copies: List[Copy] = []
        self.by_view: Dict[tuple, Copy] = {}
        self.hooked = False   # make_room is registered with the SBUF accountant


_books: "weakref.WeakKeyDictionary[KernelContext, _Book]" = weakref.WeakKeyDictionary()


def copies(ctx: KernelContext) -> List[Copy]:
    """The broadcast copies kernel instance ``ctx`` made so far."""
    b = _books.get(ctx)
    return list(b.copies) if b is not None else []


def lower(ctx: KernelContext, t: NkiTensor, engine: str) -> NkiTensor:
    """Trace the broadcast of stride-0-partition view ``t`` for ``engine`` and return a view with
    the same values whose trace region is the broadcast copy (``t`` itself under "free")."""
    how = lowering(ctx, t, engine)
    if how == "free":
        return t
    row = region(t._derive(t._off, (1,) + t._shape[1:], t._strides))
    book = _books.get(ctx)
    if book is None:
        book = _books[ctx] = _Book()
    key = (how, row, t._shape, t._strides)
    c = book.by_view.get(key) if ctx.spec.broadcast.partition_reuse == "resident" else None
    if c is None or not _source_unchanged(ctx, c):
        c = _make(ctx, t, how, row)
        book.copies.append(c)
        book.by_view[key] = c
    elements = 1
    for n in t._shape:
        elements *= n
    dname, isz = c.dtype_isz()
    v = t._derive(t._off, t._shape, t._strides)
    v._mask = t._mask
    v._region = Region(c.memory, c.sid, c.name, 0, c.P, 0, c.F * isz, elements, dname,
                       _run(t) * isz, False)
    return v


def _make(ctx: KernelContext, t: NkiTensor, how: str, row: Region) -> Copy:
    """Trace the instruction(s) that make a copy of ``t``'s row, counted in its memory."""
    P, F = t._shape[0], distinct_free(t)
    loc = user_loc()
    sid = next(_storage._ids)  # the copy's allocation id: a fresh tile's (fast-forward sees it so)
    name = t.name + COPY_SUFFIX
    src_dtype, src_isz = dt.name(t._dtype), t._st.sdtype.itemsize
    tr = ctx.trace
    first = len(tr.instructions)
    if how == "tensor":
        ctx.psum.charge_copy(sid, name, loc, P, F * dt.as_dtype(_PSUM_DTYPE).itemsize, first)
        _trace_matmuls(ctx, row, sid, name, P, F, src_dtype, src_isz, loc)
        book = _books[ctx]
        if not book.hooked:   # before SBUF is checked, PSUM makes room (make_room)
            book.hooked = True
            ref = weakref.ref(ctx)   # the accountant's hook must not keep its context alive
            ctx.sbuf.before_check.append(lambda: make_room(ref()))
    else:
        ctx.sbuf.charge_copy(sid, name, loc, P, F * src_isz, first)
        dst = Region("sbuf", sid, name, 0, P, 0, F * src_isz, P * F, src_dtype, F * src_isz, False)
        ctx.record("dma", OPCODE, [row], [dst], P, F, src_dtype, src_dtype,
                   (("direction", "sbuf->sbuf"), ("lowering", "dma")), loc)
    return Copy(sid, name, P, F, "psum" if how == "tensor" else "sbuf", row, src_dtype, src_isz,
                loc, list(range(first, len(tr.instructions))), tr.remap_epoch())


def _source_unchanged(ctx: KernelContext, c: Copy) -> bool:
    """Whether nothing wrote ``c``'s source bytes since it was made (checked incrementally: each
    instruction once per copy)."""
    tr = ctx.trace
    il = tr.instructions
    lo = tr.resolve(c.checked, c.epoch)
    row = c.row
    for ins in il.iter_range(lo, len(il)):
        for w in ins.writes:
            if w.tensor == row.tensor and w.overlaps(row):
                return False
    c.checked, c.epoch = len(il), tr.remap_epoch()
    return True


def make_room(ctx: KernelContext) -> None:
    """End of a kernel instance, before SBUF is checked: the PSUM copies live where PSUM
    overflows (``Accountant.overflowing``; none when the kernel fits in the order the PSUM check
    accepts) are made by DMA into SBUF instead (cores.toml [vN.broadcast] partition)."""
    if ctx is None:
        return
    moving = [c for c in copies(ctx) if c.memory == "psum"]
    over = ctx.psum.overflowing(ctx.trace, ctx.sbuf, {c.sid for c in moving}) if moving else ()
    for c in moving:
        if c.sid in over:
            _to_sbuf(ctx, c)


def _to_sbuf(ctx: KernelContext, c: Copy) -> None:
    """Rewrite copy ``c``'s matmuls as DMAs of the same columns into an SBUF copy, its consumers'
    reads to that copy, and move its live range from the PSUM accountant to the SBUF one."""
    tr = ctx.trace
    il = tr.instructions
    if il.blocks:   # synthesized iterations cannot be rewritten: trace every iteration
        from .fastforward import Rerun
        raise Rerun()
    iv = ctx.psum.intervals.pop(c.sid)
    ctx.psum.parts.pop(c.sid, None)
    osz = dt.as_dtype(_PSUM_DTYPE).itemsize
    isz = c.src_isz
    accesses = []
    for j in (tr.resolve(k, c.epoch) for k in c.made):
        ins = il[j]
        if ins.opcode != OPCODE:
            continue
        c0, c1 = ins.writes[0].start // osz, ins.writes[0].stop // osz
        n = c1 - c0
        dst = Region("sbuf", c.sid, c.name, 0, c.P, c0 * isz, c1 * isz, c.P * n, c.src_dtype,
                     n * isz, False)
        il[j] = ins._replace(engine="dma", writes=(dst,), partitions=c.P, free=n,
                             dtype_out=c.src_dtype,
                             attrs=(("direction", "sbuf->sbuf"), ("lowering", "dma"),
                                    ("psum_full", True)))
        accesses.append((j, True))
    for ins in il.iter_range(iv[0], iv[1] + 1):
        if any(r.tensor == c.sid for r in ins.reads):
            il[ins.index] = ins._replace(reads=tuple(
                r._replace(memory="sbuf", start=r.start // osz * isz, stop=r.stop // osz * isz,
                           dtype=c.src_dtype, contiguous=r.contiguous // osz * isz)
                if r.tensor == c.sid else r for r in ins.reads))
            accesses.append((ins.index, False))
    ctx.sbuf.charge_copy(c.sid, c.name, c.loc, c.P, c.F * isz, iv[0])
    ctx.sbuf.intervals[c.sid][1] = iv[1]
    if ctx.sbuf.accesses is not None:   # the spill planner's record of this tile's accesses
        ctx.sbuf.accesses[c.sid] = sorted(accesses)
    c.memory = "sbuf"


def lower_implicit(ctx: KernelContext, t: NkiTensor, shape: Tuple[int, ...],
                   engine: str) -> NkiTensor:
    """``lower`` for an operand that numpy broadcasting repeats over the partitions of ``shape``
    (``nl.add`` of a [1, F] and a [P, F] tile: "P-dim broadcast allowed but costly"); ``t`` itself
    when it needs none (or under "free", whose trace is the model before)."""
    if t._shape[0] != 1 or shape[0] <= 1 or len(t._shape) != len(shape) or \
            engine not in COMPUTE_ENGINES:
        return t
    view = t.broadcast_to(shape)
    return t if lowering(ctx, view, engine) == "free" else lower(ctx, view, engine)


def matmul_chunks(ctx: KernelContext, free: int) -> List[Tuple[int, int]]:
    """Column ranges [c0, c1) of the broadcast matmuls: at most ``tensor.max_moving_free`` each
    (one PSUM bank of fp32 on v2/v3)."""
    step = ctx.spec.tensor.max_moving_free
    return [(c, min(c + step, free)) for c in range(0, free, step)]


def _trace_matmuls(ctx: KernelContext, row: Region, sid: int, name: str, P: int, F: int,
                   src_dtype: str, isz: int, loc) -> None:
    """One K=1 matmul per chunk: moving = the source row's columns, stationary = the ones row (a
    compile-time constant [ARCH2], not traced), output [P, chunk] fp32 into the PSUM copy.
    ``isz``: bytes per source element in storage (the row region's unit)."""
    osz = dt.as_dtype(_PSUM_DTYPE).itemsize
    exact = row.contiguous == row.stop - row.start == F * isz  # a plain row: chunk it exactly
    for c0, c1 in matmul_chunks(ctx, F):
        n = c1 - c0
        src = row._replace(start=row.start + c0 * isz, stop=row.start + c1 * isz, elements=n,
                           contiguous=n * isz) if exact else row
        dst = Region("psum", sid, name, 0, P, c0 * osz, c1 * osz, P * n, _PSUM_DTYPE, n * osz, False)
        ctx.record("tensor", OPCODE, [src], [dst], 1, n, src_dtype, _PSUM_DTYPE,
                   (("contraction", 1), ("stationary_free", P), ("moving_free", n),
                    ("onezero", True), ("lowering", "tensor")), loc)
