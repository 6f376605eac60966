"""The block update of tiled kernels, ``x[...] = nl.add(x[...], psum_tile, dtype=bf16)``, fused.

The reference computes the fp32 op into a fresh bf16 array (the op's result tile), then the
assignment copies it into ``x`` (assign._retarget, base.write).  Where the user's statement is
``<name>[<key>] = nl.<op>(...)`` with ``<name>`` an NKI tensor (read from its bytecode: nothing
but loads and index arithmetic between the call's return and the store, so the store follows at
once, and no list or dict keeps the tile), the op's result tile is left pending (its storage is a
``PendingBinary``) and the assignment computes it straight into the destination with one C loop
(``fastpath.binary_into``: fp32 op, round to nearest even): no temporary, no copy.  Any other use
of the pending tile computes it on first read, as the eager path would have.  Everything else
(the checks, the instruction, its re-pointing at the destination, liveness) is what the general
path does; tests/nki/test_fastpath_update.py holds both to the same bits and the same trace.
"""
from __future__ import annotations

import dis
from typing import Optional

import numpy as np

from ..core import dtypes as dt, fastpath
from ..core.context import fresh_region, region
from ..core.storage import LazyStorage
from ..core.tensor import NkiTensor
from .hot_matmul import cached_site
from .operands import AutoEngine, auto_engine

_BF16 = dt.bfloat16
_U8 = np.dtype(np.uint8)
_NO_DATA = np.empty(0, np.uint8)  # a pending result's bytes before (and after) it is written
# between a call's return and the STORE_SUBSCR that takes its result: only these (loads and
# index arithmetic on the key), so no kernel op can run and change the operands meanwhile
_BETWEEN = ("LOAD_FAST", "LOAD_CONST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "BUILD_TUPLE",
            "BINARY_OP", "BINARY_ADD", "BINARY_SUBTRACT", "BINARY_MULTIPLY", "CACHE", "NOP",
            "EXTENDED_ARG", "LOAD_FAST_LOAD_FAST", "LOAD_FAST_CHECK")
# code object -> {None: _store_sites(code), offset: (location, container load or None)}
_STORE_SITES: dict = {}
_CONTAINER_LOADS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST_CHECK")
_SHARES_WORK = 10_000  # np.shares_memory's search bound (a host-side choice): past it, declined


class PendingBinary(LazyStorage):
    """An elementwise result tile's storage whose values are computed on first read of ``data``:
    ``x[...] = op(...)`` writes them straight into ``x`` instead (``assign_into``)."""
    __slots__ = ()

    def compute(self, operands) -> np.ndarray:
        """``bf16(a <op> b)`` as bytes, as the eager path computes it."""
        name, va, vb = operands[:3]
        out = np.empty(va.shape, _BF16)
        fastpath.binary_into(name, va, vb, out)
        return out.reshape(-1).view(_U8)


def _store_sites(code) -> dict:
    """{f_lasti: (opname, name) of the container's load} for the offsets at which ``code`` is
    inside a call whose result the following instructions store with ``name[key] = ...`` (only
    the container's load, then loads and key arithmetic, in between)."""
    ins = list(dis.get_instructions(code))
    out = {}
    for i, cur in enumerate(ins):
        if not cur.opname.startswith("CALL") or i + 1 >= len(ins) or \
                ins[i + 1].opname not in _CONTAINER_LOADS:
            continue
        j, depth = i + 1, 0
        while j < len(ins) and ins[j].opname in _BETWEEN:
            depth += dis.stack_effect(ins[j].opcode, ins[j].arg)
            j += 1
        # the result is the stored value when exactly the container and the key sit above it
        if j < len(ins) and ins[j].opname == "STORE_SUBSCR" and depth == 2:
            load = (ins[i + 1].opname, ins[i + 1].argval)
            out.update(dict.fromkeys(range(cur.offset, ins[i + 1].offset), load))
    return out


def _container(f, load):
    """The object the store site's container load reads in frame ``f`` (None when unknown)."""
    op, name = load
    if op == "LOAD_GLOBAL":
        return f.f_globals.get(name)
    got = f.f_locals.get(name)  # LOAD_FAST, LOAD_DEREF (free variables are listed too), LOAD_NAME
    return f.f_globals.get(name) if got is None and op == "LOAD_NAME" else got


def _user_site():
    """(source location, the result is stored into an NKI tensor by ``x[key] = <call>``) of the
    innermost user frame: a store into a list or dict would keep the pending tile past later
    writes of its operands, so the container itself is checked."""
    (loc, load), f = cached_site(3, _STORE_SITES, _store_sites)
    return loc, load is not None and type(_container(f, load)) is NkiTensor


def pending(ctx, name: str, a: NkiTensor, b: NkiTensor, va: np.ndarray, vb: np.ndarray,
            od, eng, attrs: tuple) -> Optional[NkiTensor]:
    """``nl.<name>(a, b, dtype=bf16)`` of two fully written same-shaped tiles as a fresh tile
    whose values are pending, or None (the caller computes them at once)."""
    if od != _BF16 or not fastpath.binary_into_ok(name, va, vb):
        return None
    loc, stored = _user_site()
    if not stored:
        return None
    shape = a._shape
    free = 1
    for s in shape[1:]:
        free *= s
    pstride = free * 2
    st = PendingBinary.fresh("sbuf", f"t{next(ctx.name_counter)}", shape[0] * pstride, _BF16,
                             shape[0], pstride, loc, _NO_DATA)
    st.operands = (name, va, vb, a, b)
    strides = []
    acc = 2
    for s in reversed(shape[1:]):
        strides.append(acc)
        acc *= s
    out = NkiTensor(st, 0, shape, (pstride,) + tuple(reversed(strides)), od, 0)
    reg = out._region = fresh_region(st, shape, od)
    rregs = [a._region or region(a), b._region or region(b)]
    if type(eng) is AutoEngine:  # left to the compiler: record the engines it may pick
        eng, attrs = auto_engine(ctx, eng, "tensor_tensor", attrs)
    idx = ctx.record(eng, "tensor_tensor", rregs, [reg], shape[0], free, dt.name(a._dtype),
                     "bfloat16", attrs, loc, fresh_writes=True)
    out._fresh = (ctx, idx, eng, "tensor_tensor")
    out._mask = None
    return out


def _clear_of(t: NkiTensor, v: np.ndarray, dst: NkiTensor, out: np.ndarray) -> bool:
    """True when operand ``t`` (values ``v``) shares no bytes with ``dst`` (array ``out``), or
    only element for element (the C loop reads each element before it writes the same one)."""
    if t._st is not dst._st or (t._off == dst._off and t._shape == dst._shape and
                                t._strides == dst._strides):
        return True
    try:  # another block of the same tile (res[1] = res[0] + y): interleaved, often disjoint
        return not np.shares_memory(v, out, max_work=_SHARES_WORK)
    except RuntimeError:  # numpy's TooHardError: the bound was reached
        return False


def assign_into(ctx, dst: NkiTensor, value: NkiTensor) -> bool:
    """``dst[...] = value`` for a pending result: its values computed straight into ``dst`` and
    its instruction re-pointed there; False (nothing done) when ``dst`` is not a plain fully
    written bf16 tile the op's engine may write."""
    st = value._st
    ops = st.operands
    dst_st = dst._st
    if ops is None or not fastpath.ON or dst._dtype != _BF16 or dst_st.sdtype != _BF16 \
            or not dst_st.full or dst_st.manual or dst_st.readonly or dst._gather is not None \
            or dst._shape != value._shape or dst_st.memory == "hbm":
        return False
    f = value._fresh
    if f is None or f[0] is not ctx or value._mask is not None:
        return False
    if "w" not in getattr(getattr(ctx.spec.engines, f[2]), dst_st.memory):
        return False
    tr = ctx.trace
    tail = tr.instructions.plain_list()
    if tail is None or tr._remaps:
        return False
    out = dst.array()
    if not _clear_of(ops[3], ops[1], dst, out) or not _clear_of(ops[4], ops[2], dst, out):
        return False
    st.operands = None
    fastpath.binary_into(ops[0], ops[1], ops[2], out)
    dst_st._f32 = None  # fp32_dirty(), inlined
    value._fresh = None
    idx = f[1]
    ins = tail[idx]
    dreg = tr.intern(dst._region or region(dst))
    tail[idx] = ins._replace(writes=(dreg,) + ins.writes[1:], dtype_out="bfloat16")
    ctx.touch(dreg, idx)
    return True
