"""In-kernel collectives (``nki.collectives``): rank-to-rank data movement with real values.

Each rank is one logical core running the whole kernel (``world.launch_ranks``); a collective
reads this rank's sources, meets the other ranks of its rank-list in the World, and writes this
rank's share of the combined result.  Reductions accumulate in fp32 (ints in int64) in rank-list
order and round once into the destination dtype (choice: the docs do not say how the collective
engine accumulates).  One instruction per call lands in the trace (engine dma, the collective's
opcode), with its bytes, group size, peers and the chips it spans, for timing/collectives.py.

A launch without ranks is a world of one rank: a collective over the group ``[[0]]`` copies its
sources; naming another rank is an error that says how to launch several.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ...errors import KernelError, MemoryAccessError, ShapeError
from ..core import dtypes as dt
from ..core.alu import token_name
from ..core.context import current, region
from ..core.tensor import NkiTensor
from ..core import gates
from .. import world as _w
from . import base
from .base import where

REDUCE_OPS = ("add", "maximum", "minimum")


# -- operands -----------------------------------------------------------------------------------

def _tensors(xs, role: str, kind: str) -> List[NkiTensor]:
    current()  # outside a kernel: err_nki_api_outside_of_nki_kernel before any operand check
    if isinstance(xs, NkiTensor):
        xs = [xs]
    if not isinstance(xs, (list, tuple)) or not xs:
        raise KernelError(f"{kind}: {role} must be a non-empty list of tensors",
                          rule="collective-operands", value=type(xs).__name__, where=where())
    return [base.need_tensor(x, role, kind) for x in xs]


def _check_memories(kind: str, srcs, dsts, hbm_only: bool, single: bool) -> str:
    """All tensors on HBM or all on SBUF; SBUF (or ``single``) allows one tensor per list."""
    mems = {t._st.memory for t in list(srcs) + list(dsts)}
    if len(mems) > 1:
        raise MemoryAccessError(f"{kind}: tensors must all be on HBM or all on SBUF, got "
                                f"{sorted(mems)}", rule="collective-memory", limit="hbm | sbuf",
                                value=sorted(mems), where=where())
    mem = mems.pop()
    if mem not in ("hbm", "sbuf") or (hbm_only and mem != "hbm"):
        allowed = "hbm" if hbm_only else "hbm | sbuf"
        raise MemoryAccessError(f"{kind}: tensors on {mem.upper()} are not supported",
                                rule="collective-memory", limit=allowed, value=mem, where=where())
    if (mem == "sbuf" or single) and (len(srcs) > 1 or len(dsts) > 1):
        raise KernelError(f"{kind}: coalesced (several-tensor) collectives need HBM tensors"
                          if not single else f"{kind}: each list holds exactly one tensor",
                          rule="collective-coalesced", limit=1,
                          value=max(len(srcs), len(dsts)), where=where())
    if len(srcs) != len(dsts):
        raise KernelError(f"{kind}: {len(srcs)} sources but {len(dsts)} destinations",
                          rule="collective-operands", limit=len(srcs), value=len(dsts),
                          where=where())
    for t in list(srcs) + list(dsts):
        if t._st.memory == "hbm" and t._st.loc is None:  # a kernel argument (harness._Inputs)
            raise MemoryAccessError(f"{kind}: '{t.name}' is a kernel input; collectives cannot "
                                    "read or write the kernel's I/O tensors",
                                    rule="collective-io-tensor", value=t.name, where=where(),
                                    hint="dma_copy it into an nl.shared_hbm tensor first")
    return mem


def _reduce_op(op, kind: str) -> str:
    name = token_name(op, f"{kind} op")
    if name not in REDUCE_OPS:
        raise KernelError(f"{kind}: reduction {name!r} is not supported", rule="collective-op",
                          limit=" | ".join(REDUCE_OPS), value=name, where=where())
    return name


def _read(ctx, t: NkiTensor, kind: str):
    vals, init = base.read(ctx, t, kind)
    if not ctx.numerics:
        return None, None
    return np.array(vals, copy=True), (None if init is None else np.array(init, copy=True))


def _nbytes(ts) -> int:
    return sum(t.size * t.itemsize for t in ts)


def _sig(srcs, dsts) -> Tuple:
    return tuple((tuple(s.shape), tuple(d.shape), dt.name(s.dtype), dt.name(d.dtype))
                 for s, d in zip(srcs, dsts))


# -- the world ----------------------------------------------------------------------------------

def _rank_of(ctx) -> Tuple[Optional[_w.World], int, int]:
    w = ctx.shared.get("world")
    return w, int(ctx.shared.get("rank", 0)), (w.ranks if w is not None else 1)


def _chips(ctx, ranks: Sequence[int]) -> int:
    """Chips the ranks span: rank r is logical core r, chip r // (logical cores per chip)."""
    per_chip = max(1, ctx.chip.cores // max(1, ctx.lnc))
    return len({r // per_chip for r in ranks})


def rank_id() -> int:
    """This rank's id in the launch (0 for a single-rank launch)."""
    return _rank_of(current())[1]


def _group_call(kind: str, srcs, dsts, groups, params: Tuple, combine, payload, nbytes: int,
                extra_attrs: Tuple = ()):
    ctx = current()
    gates.require(ctx, kind)
    w, rank, n_world = _rank_of(ctx)
    loc_s = where()
    members = _w.check_groups(groups, n_world, rank, kind, loc_s)
    from ...source import user_loc
    loc = user_loc()
    call = _w.Call(kind, members, tuple(tuple(g) for g in groups), params, _sig(srcs, dsts),
                   payload, loc, combine)
    if w is None or len(members) == 1:
        out = combine([call])[0]
    else:
        out = w.collective(rank, ctx.core_id, call)
    for d, (vals, init) in zip(dsts, out):
        base.write(ctx, d, vals if ctx.numerics else None, init)
    attrs = (("ranks", len(members)), ("peers", members), ("chips", _chips(ctx, members)),
             ("bytes", int(nbytes))) + tuple(params_attrs(params)) + tuple(extra_attrs)
    _record(ctx, kind, srcs, dsts, attrs, loc)


def params_attrs(params: Tuple):
    """Instruction attributes from a collective's (name, value) parameters."""
    return [p for p in params if isinstance(p, tuple) and len(p) == 2]


def _record(ctx, kind: str, srcs, dsts, attrs, loc) -> None:
    d0 = dsts[0] if dsts else srcs[0]
    free = 1
    for s in d0.shape[1:]:
        free *= s
    ctx.record("dma", kind, [region(s) for s in srcs], [region(d) for d in dsts],
               d0.shape[0] if d0.shape else 1, free, dt.name(srcs[0].dtype) if srcs else "-",
               dt.name(d0.dtype), tuple(attrs), loc)


def _acc(vals: np.ndarray, src_dtype) -> np.ndarray:
    if np.dtype(src_dtype).kind in "iub":
        return vals.astype(np.int64)
    return vals.astype(np.float32)


def _shaped(init, shape):
    return None if init is None else init.reshape(shape)


def _and(inits, shape) -> Optional[np.ndarray]:
    got = [i for i in inits if i is not None]
    if not got:
        return None
    out = np.ones(shape, np.uint8)
    for i in got:
        out &= i.reshape(shape).astype(np.uint8)
    return out


def _cat(parts, inits, axis: int):
    if parts[0] is None:
        return None, None
    vals = np.concatenate(parts, axis=axis)
    if all(i is None for i in inits):
        return vals, None
    return vals, np.concatenate([np.ones(p.shape, np.uint8) if i is None else i
                                 for p, i in zip(parts, inits)], axis=axis)


def _reduce(vals, op: str):
    f = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum}[op]
    out = vals[0]
    for v in vals[1:]:
        out = f(out, v)
    return out


# -- group collectives ----------------------------------------------------------------------------

def all_reduce(srcs, dsts, groups, op) -> None:
    """Every rank of a rank-list gets the elementwise ``op`` (add/maximum/minimum) of all sources."""
    kind = "all_reduce"
    srcs, dsts = _tensors(srcs, "srcs", kind), _tensors(dsts, "dsts", kind)
    _check_memories(kind, srcs, dsts, hbm_only=False, single=False)
    opn = _reduce_op(op, kind)
    for s, d in zip(srcs, dsts):
        if s.size != d.size or s.dtype != d.dtype:
            raise ShapeError(f"{kind}: destination '{d.name}' {d.shape} {dt.name(d.dtype)} does not "
                             f"match source '{s.name}' {s.shape} {dt.name(s.dtype)}",
                             rule="collective-shape", limit=(s.shape, dt.name(s.dtype)),
                             value=(d.shape, dt.name(d.dtype)), where=where())
    ctx = current()
    payload = [_read(ctx, s, kind) for s in srcs]

    def combine(calls):
        def one(i):
            d = dsts[i]
            v = _reduce([_acc(c.payload[i][0], srcs[i].dtype).reshape(d.shape) for c in calls], opn)
            return [(v, _and([c.payload[i][1] for c in calls], d.shape))] * len(calls)
        return _per_tensor(calls, len(dsts), one)
    _group_call(kind, srcs, dsts, groups, (("op", opn),), combine, payload, _nbytes(srcs))


def _per_tensor(calls, count: int, one) -> List[list]:
    """Every rank's list of (values, init) over ``count`` tensors; ``one(i)`` gives tensor i's pairs,
    one per rank.  A tensor without values (a timing-only run) gives (None, None) to every rank."""
    per_rank: List[list] = [[] for _ in calls]
    for i in range(count):
        got = [(None, None)] * len(calls) if calls[0].payload[i][0] is None else one(i)
        for r, pair in zip(per_rank, got):
            r.append(pair)
    return per_rank


def _need_split(kind, s: NkiTensor, dim: int, n: int) -> None:
    if s.shape[dim] % n:
        raise ShapeError(f"{kind}: source '{s.name}' dim {dim} ({s.shape[dim]}) does not split "
                         f"into {n} ranks", rule="collective-shape",
                         limit=f"a multiple of {n}", value=s.shape[dim], where=where())


def _dim(kind: str, mem: str, collective_dim, allowed_hbm=(0,), allowed_sbuf=(0,)) -> int:
    d = int(collective_dim)
    allowed = allowed_hbm if mem == "hbm" else allowed_sbuf
    if d not in allowed:
        raise KernelError(f"{kind}: collective_dim {d} is not supported for {mem.upper()} tensors",
                          rule="collective-dim", limit=list(allowed), value=d, where=where())
    return d


def _need_shape(kind, d: NkiTensor, want, s: NkiTensor) -> None:
    if tuple(d.shape) != tuple(want) or d.dtype != s.dtype:
        raise ShapeError(f"{kind}: destination '{d.name}' is {d.shape} {dt.name(d.dtype)}; with "
                         f"source '{s.name}' {s.shape} it must be {tuple(want)} "
                         f"{dt.name(s.dtype)}", rule="collective-shape",
                         limit=(tuple(want), dt.name(s.dtype)), value=(d.shape, dt.name(d.dtype)),
                         where=where())


def all_gather(srcs, dsts, groups, collective_dim) -> None:
    """Every rank gets the sources of its rank-list concatenated along ``collective_dim``, in
    rank-list order."""
    kind = "all_gather"
    srcs, dsts = _tensors(srcs, "srcs", kind), _tensors(dsts, "dsts", kind)
    mem = _check_memories(kind, srcs, dsts, hbm_only=False, single=False)
    dim = _dim(kind, mem, collective_dim, (0,), (0, 1))
    ctx = current()
    n = len(_w.check_groups(groups, _rank_of(ctx)[2], _rank_of(ctx)[1], kind, where()))
    for s, d in zip(srcs, dsts):
        want = list(s.shape)
        want[dim] *= n
        _need_shape(kind, d, want, s)
    payload = [_read(ctx, s, kind) for s in srcs]

    def combine(calls):
        def one(i):
            s = srcs[i]
            return [_cat([c.payload[i][0].reshape(s.shape) for c in calls],
                         [_shaped(c.payload[i][1], s.shape) for c in calls], dim)] * len(calls)
        return _per_tensor(calls, len(srcs), one)
    _group_call(kind, srcs, dsts, groups, (("collective_dim", dim),), combine, payload,
                _nbytes(dsts))


def reduce_scatter(srcs, dsts, groups, collective_dim, op) -> None:
    """Rank k of a rank-list gets chunk k (along ``collective_dim``) of the ``op`` of all sources."""
    kind = "reduce_scatter"
    srcs, dsts = _tensors(srcs, "srcs", kind), _tensors(dsts, "dsts", kind)
    mem = _check_memories(kind, srcs, dsts, hbm_only=False, single=False)
    dim = _dim(kind, mem, collective_dim)
    opn = _reduce_op(op, kind)
    ctx = current()
    n = len(_w.check_groups(groups, _rank_of(ctx)[2], _rank_of(ctx)[1], kind, where()))
    for s, d in zip(srcs, dsts):
        _need_split(kind, s, dim, n)
        want = list(s.shape)
        want[dim] //= n
        _need_shape(kind, d, want, s)
    payload = [_read(ctx, s, kind) for s in srcs]

    def combine(calls):
        def one(i):
            s = srcs[i]
            v = _reduce([_acc(c.payload[i][0], s.dtype).reshape(s.shape) for c in calls], opn)
            init = _and([c.payload[i][1] for c in calls], s.shape)
            step = s.shape[dim] // len(calls)
            out = []
            for k in range(len(calls)):
                sl = [slice(None)] * len(s.shape)
                sl[dim] = slice(k * step, (k + 1) * step)
                out.append((v[tuple(sl)], None if init is None else init[tuple(sl)]))
            return out
        return _per_tensor(calls, len(srcs), one)
    _group_call(kind, srcs, dsts, groups, (("op", opn), ("collective_dim", dim)), combine,
                payload, _nbytes(srcs))


def all_to_all(srcs, dsts, groups, collective_dim) -> None:
    """Chunk j (along ``collective_dim``) of rank i's source becomes chunk i of rank j's
    destination, i and j positions in the rank-list."""
    kind = "all_to_all"
    srcs, dsts = _tensors(srcs, "srcs", kind), _tensors(dsts, "dsts", kind)
    _check_memories(kind, srcs, dsts, hbm_only=True, single=False)
    dim = _dim(kind, "hbm", collective_dim)
    ctx = current()
    n = len(_w.check_groups(groups, _rank_of(ctx)[2], _rank_of(ctx)[1], kind, where()))
    for s, d in zip(srcs, dsts):
        _need_split(kind, s, dim, n)
        _need_shape(kind, d, s.shape, s)
    payload = [_read(ctx, s, kind) for s in srcs]

    def combine(calls):
        m = len(calls)

        def one(i):
            s = srcs[i]
            chunks = [np.split(c.payload[i][0].reshape(s.shape), m, axis=dim) for c in calls]
            inits = [None if c.payload[i][1] is None else
                     np.split(c.payload[i][1].reshape(s.shape), m, axis=dim) for c in calls]
            return [_cat([chunks[k][j] for k in range(m)],
                         [None if inits[k] is None else inits[k][j] for k in range(m)], dim)
                    for j in range(m)]
        return _per_tensor(calls, len(srcs), one)
    _group_call(kind, srcs, dsts, groups, (("collective_dim", dim),), combine, payload,
                _nbytes(srcs))


# -- point to point (collective_permute family) ----------------------------------------------------

def _p2p(kind: str, sends: Sequence[int], recvs: Sequence[int], src: Optional[NkiTensor],
         dst: NkiTensor, channel: int, value_of, attrs: Tuple, reads) -> None:
    """Send this rank's value to each rank of ``sends``, then receive from each of ``recvs`` into
    ``dst`` (the last one received wins; the permutes below have at most one)."""
    ctx = current()
    gates.require(ctx, kind)
    w, rank, n_world = _rank_of(ctx)
    from ...source import user_loc
    loc = user_loc()
    value = value_of(ctx)
    chan = (ctx.core_id, kind, int(channel))
    got = None
    for t in sends:
        if t == rank:
            got = value
        elif w is not None:
            w.send(rank, t, chan, value, loc)
    for s in recvs:
        if s == rank:
            got = value
            continue
        if w is None:
            raise KernelError(f"{kind}: rank {rank} receives from rank {s} but the launch has one "
                              "rank", rule="replica-group-rank", limit="ranks 0..0", value=s,
                              where=where(), hint="launch with run_ranks(kernel, ranks=N)")
        got = w.recv(s, rank, ctx.core_id, chan, f"{kind} (receive from rank {s})", loc)
    if got is not None:
        vals, init = got
        if vals is not None and (vals.size != dst.size):
            raise ShapeError(f"{kind}: rank {rank} receives {vals.size} elements into '{dst.name}' "
                             f"{dst.shape} ({dst.size} elements)", rule="collective-shape",
                             limit=dst.size, value=vals.size, where=where())
        base.write(ctx, dst, None if vals is None else vals.reshape(dst.shape),
                   _shaped(init, dst.shape))
    peers = tuple(sorted(set(sends) | set(recvs)))
    nbytes = max(_nbytes([src]) if (src is not None and sends) else 0,
                 _nbytes([dst]) if recvs else 0)
    members = tuple(sorted(set(peers) | {rank}))
    _record(ctx, kind, reads, [dst], (("ranks", len(members)), ("peers", peers),
                                       ("chips", _chips(ctx, members)), ("bytes", int(nbytes)),
                                       ("channel", int(channel))) + tuple(attrs), loc)


def _single(xs, role: str, kind: str) -> NkiTensor:
    ts = _tensors(xs, role, kind)
    if len(ts) != 1:
        raise KernelError(f"{kind}: {role} must hold exactly one tensor (coalesced permutes are not "
                          "supported)", rule="collective-coalesced", limit=1, value=len(ts),
                          where=where())
    return ts[0]


def collective_permute(srcs, dsts, source_target_pairs) -> None:
    """Each ``(source, target)`` pair sends the source rank's tensor to the target rank; a rank
    that is no target keeps its destination unchanged."""
    kind = "collective_permute"
    s, d = _single(srcs, "srcs", kind), _single(dsts, "dsts", kind)
    _check_memories(kind, [s], [d], hbm_only=True, single=True)
    ctx = current()
    _, rank, n_world = _rank_of(ctx)
    pairs = []
    for p in source_target_pairs:
        a, b = (int(x) for x in p)
        for r in (a, b):
            if not 0 <= r < n_world:
                raise KernelError(f"{kind}: pair {tuple(p)} names rank {r} but the launch has "
                                  f"{n_world} rank(s)", rule="replica-group-rank",
                                  limit=f"ranks 0..{n_world - 1}", value=r, where=where(),
                                  hint="launch with run_ranks(kernel, ranks=N)")
        pairs.append((a, b))
    for i, role in ((0, "source"), (1, "target")):
        seen = [p[i] for p in pairs]
        dup = sorted({r for r in seen if seen.count(r) > 1})
        if dup:
            raise KernelError(f"{kind}: rank {dup[0]} is the {role} of two pairs",
                              rule="permute-pairs", limit=f"each rank {role} of at most one pair",
                              value=dup[0], where=where())
    sends = [b for a, b in pairs if a == rank]
    recvs = [a for a, b in pairs if b == rank]
    _p2p(kind, sends, recvs, s, d, 0, lambda c: _read(c, s, kind),
         (("pairs", tuple(pairs)),), [s])


def _ring(groups, channel_ids, kind: str):
    ctx = current()
    _, rank, n_world = _rank_of(ctx)
    members = _w.check_groups(groups, n_world, rank, kind, where())
    chans = [int(c) for c in channel_ids]
    if chans != list(range(len(chans))):
        raise KernelError(f"{kind}: channel_ids must be consecutive integers from 0",
                          rule="permute-channels", limit=list(range(len(chans))), value=chans,
                          where=where())
    pos = members.index(rank)
    return members, members[(pos + 1) % len(members)], members[(pos - 1) % len(members)], chans


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, groups, channel_ids=(0,)) -> None:
    """On each channel, send the source to the next rank of the rank-list (a ring) and receive the
    previous rank's source into the destination."""
    kind = "collective_permute_implicit"
    members, nxt, prev, chans = _ring(groups, channel_ids, kind)
    if len(srcs_by_channel) != len(chans) or len(dsts_by_channel) != len(chans):
        raise KernelError(f"{kind}: one source and one destination list per channel",
                          rule="permute-channels", limit=len(chans),
                          value=(len(srcs_by_channel), len(dsts_by_channel)), where=where())
    for ch, ss, ds in zip(chans, srcs_by_channel, dsts_by_channel):
        s, d = _single(ss, "srcs", kind), _single(ds, "dsts", kind)
        _check_memories(kind, [s], [d], hbm_only=False, single=True)
        _p2p(kind, [nxt], [prev], s, d, ch, lambda c, s=s: _read(c, s, kind),
             (("ring", members),), [s])


def collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, groups,
                                       op, channel_ids=(0,)) -> None:
    """As ``collective_permute_implicit``, sending ``op(srcs0, srcs1)`` of this rank."""
    kind = "collective_permute_implicit_reduce"
    members, nxt, prev, chans = _ring(groups, channel_ids, kind)
    opn = _reduce_op(op, kind)
    for ch, s0s, s1s, ds in zip(chans, srcs0_by_channel, srcs1_by_channel, dsts_by_channel):
        s0, s1 = _single(s0s, "srcs0", kind), _single(s1s, "srcs1", kind)
        d = _single(ds, "dsts", kind)
        _check_memories(kind, [s0], [d], hbm_only=False, single=True)
        _check_memories(kind, [s1], [d], hbm_only=False, single=True)
        if s0.size != s1.size:
            raise ShapeError(f"{kind}: srcs0 {s0.shape} and srcs1 {s1.shape} differ",
                             rule="collective-shape", limit=s0.shape, value=s1.shape,
                             where=where())

        def value(c, s0=s0, s1=s1):
            (a, ia), (b, ib) = _read(c, s0, kind), _read(c, s1, kind)
            if a is None:
                return None, None
            v = _reduce([_acc(a, s0.dtype).reshape(s0.shape),
                         _acc(b, s1.dtype).reshape(s0.shape)], opn)
            return v, _and([ia, ib], s0.shape)
        _p2p(kind, [nxt], [prev], s0, d, ch, value, (("ring", members), ("op", opn)), [s0, s1])


def current_processing_rank_id(iteration_id: int, groups, channel_id: int = 0) -> int:
    """The rank whose data a ring step ``iteration_id`` holds: this rank at 0, then its
    predecessors in the rank-list, one more each step."""
    kind = "collective_permute_implicit_current_processing_rank_id"
    ctx = current()
    _, rank, n_world = _rank_of(ctx)
    members = _w.check_groups(groups, n_world, rank, kind, where())
    pos = members.index(rank)
    return members[(pos - int(iteration_id)) % len(members)]
