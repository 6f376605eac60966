"""Operands of every ISA operation: engine names, operand checks (memory, partitions, alignment,
free size, engine access), reading values with their initialized-element maps, dtype promotion and
masks.  ``base.py`` writes results and appends the instruction."""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Optional, Tuple

import numpy as np

from ...errors import (AliasError, IndexingError, KernelError, MemoryAccessError, PartitionError,
                       ShapeError)
from ...ir import engines
from ...source import describe, user_loc
from ..core import dtypes as dt, fastpath
from ..core.broadcast_lowering import is_partition_broadcast, lower as lower_broadcast
from ..core.context import KernelContext
from ..core.gates import check_dtype_supported
from ..core.index_exprs import mask_values
from ..core.subscript import check_gather_bounds
from ..core.tensor import NkiTensor


# ``nisa.engine`` (the new API's numbering; the legacy enum names the same engines), built from
# the one engine table: unknown = 0, then each engine's nisa code
Engine = IntEnum("Engine", [("unknown", 0)] + sorted(
    ((e.name, e.nisa_code) for e in engines.ENGINE_TABLE), key=lambda kv: kv[1]),
    module=__name__)
Engine.__doc__ = "``nisa.engine``: unknown = 0, then the engine table's nisa codes."


_UNKNOWN = frozenset(["unknown", "unknown_engine", ""])


class AutoEngine(str):
    """The default engine of an instruction whose ``engine=`` the kernel left to the compiler
    (None / unknown): compares equal to the plain name; ``emit`` records it as ``engine_auto``."""
    __slots__ = ()


_AUTO_NAMES: dict = {}


def engine_name(engine: Any, default: str) -> str:
    """Resolve an ``engine=`` argument (enum, alias, string, nisa code) to an engine name;
    None / unknown pick ``default`` (as an ``AutoEngine``: the compiler may move it)."""
    if engine is None:
        return _auto(default)
    if isinstance(engine, str):
        if engine.strip().lower() in _UNKNOWN:
            return _auto(default)
    elif isinstance(engine, (int, np.integer)) and not isinstance(engine, (bool, np.bool_)):
        engine = int(engine)
        if engine == 0:
            return _auto(default)
    return engines.canonical(engine, KernelError)


def _auto(default: str) -> "AutoEngine":
    got = _AUTO_NAMES.get(default)
    if got is None:
        got = _AUTO_NAMES[default] = AutoEngine(default)
    return got


# the compute engines the Neuron compiler balances elementwise work over (issue 13)
_AUTO_POOL = ("vector", "gpsimd", "scalar")
_SCALAR_BASIC_TS = frozenset([("multiply", "add"), ("multiply", None), ("add", None)])
_CAPABLE: dict = {}


def auto_engine(ctx: KernelContext, engine: str, opcode: str, attrs: tuple):
    """(plain engine name, attrs) for recording: an ``AutoEngine`` adds
    ``("engine_auto", capable engines, default first)`` when more than one engine could run the
    op on this generation; the timing model drops those that cannot touch the operands' memories
    (timing/costs.py: auto_engines).  A hot path: one memo lookup."""
    key = (engine, opcode, attrs, id(ctx.spec))
    try:
        caps = _CAPABLE.get(key)
    except TypeError:  # an unhashable attribute value: not memoized
        key, caps = None, None
    if caps is None:
        caps = _capable(ctx, str(engine), opcode,
                        {k: v for k, v in attrs if k in ("op", "op0", "op1")})
        if key is not None:
            _CAPABLE[key] = caps
    if len(caps) > 1:
        return str(engine), tuple(attrs) + (("engine_auto", caps),)
    return str(engine), attrs


def _capable(ctx: KernelContext, engine: str, opcode: str, ops: dict) -> tuple:
    """Engines that may run ``opcode`` here: the registry's engines in the balanced pool that take
    its ALU ops on this generation (bitvec: Vector only; tensor_scalar/tensor_copy on Scalar from
    v3, any tensor_scalar op from v4)."""
    from ...ir.opcodes import FEATURES, OPCODES
    from ..core.alu import is_bitvec
    spec = OPCODES.get(opcode)
    if spec is None or engine not in _AUTO_POOL:
        return (engine,)
    gen = ctx.spec.generation
    names = (ops.get("op0", ops.get("op")), ops.get("op1"))
    out = [engine]
    for e in spec.engines:
        if e == engine or e not in _AUTO_POOL:
            continue
        if getattr(ctx.spec.engines, e, None) is None:
            continue
        if e != "vector" and any(is_bitvec(n) for n in names if n):
            continue
        if e == "scalar":
            if gen < FEATURES.get(f"{opcode}.engine.scalar", 2):
                continue
            if opcode == "tensor_scalar" and names not in _SCALAR_BASIC_TS and \
                    gen < FEATURES["tensor_scalar.engine.scalar.any_op"]:
                continue
        out.append(e)
    return tuple(out)


def where() -> str:
    """The kernel source line being simulated, for error messages."""
    return describe(user_loc())


def need_tensor(x: Any, role: str, op: str) -> NkiTensor:
    """``x`` itself when it is an NKI tensor, else a KernelError naming the operand."""
    if not isinstance(x, NkiTensor):
        raise KernelError(f"{op}: {role} must be an NKI tensor, got {type(x).__name__}",
                          rule="operand-type", value=type(x).__name__, where=where())
    return x


def check_nonempty(t: NkiTensor, role: str, op: str) -> None:
    """Views may be empty (a shard with no rows); an instruction may not touch one."""
    for n in t._shape:
        if n == 0:
            raise ShapeError(f"{op}: {role} '{t.name}' is an empty view (shape {t.shape})",
                             rule="empty-access", limit="at least one element", value=t.shape,
                             where=where())


def tile(ctx: KernelContext, x: Any, role: str, op: str, engine: str, *,
         memories: Tuple[str, ...] = ("sbuf", "psum")) -> NkiTensor:
    """An on-chip tile operand read by ``engine``; fresh results become real allocations."""
    t = x if type(x) is NkiTensor else need_tensor(x, role, op)
    if 0 in t._shape:
        check_nonempty(t, role, op)
    st = t._st
    if st.memory == "hbm":
        raise MemoryAccessError(f"{op}: {role} '{t.name}' is in HBM; compute engines read SBUF/PSUM "
                                "only (load it with nl.load / nisa.dma_copy first)",
                                rule="err_unsupported_memory", limit="sbuf or psum", value="hbm",
                                where=where())
    if t._pdim != 0 or t._blocks is not None:
        raise IndexingError(f"{op}: {role} '{t.name}' of shape {t.shape} still has block dims; index "
                            "the blocks to get a tile", rule="err_failed_to_infer_tile_from_local_tensor",
                            limit="a tile (partition dim first)", value=t.shape, where=where())
    if st.memory not in memories:
        raise MemoryAccessError(f"{op}: {role} '{t.name}' must be in {' or '.join(memories).upper()}",
                                rule="operand-memory", limit=memories, value=st.memory,
                                where=where())
    if engine == "gpsimd" and st.memory == "psum" and ctx.conventions.stage_psum_operands:
        t = implicit_copy(ctx, t, role, op)  # the compiler stages PSUM through SBUF
        st = t._st
    if (engine, st.memory) not in ctx.readable:
        check_engine_access(ctx, engine, st.memory, "r", op, role, t)
    if t._shape[0] > ctx.pmax:
        check_partitions(ctx, t, role, op)
    if not st.accounted:
        ctx.charge(st, first=produced_at(ctx, t))
    t._fresh = None
    if t._strides[0] == 0 and is_partition_broadcast(t, engine):
        t = lower_broadcast(ctx, t, engine)  # the compiler's broadcast instruction, then the read
    return t


def produced_at(ctx: KernelContext, t: NkiTensor) -> Optional[int]:
    """Where a result tile's live range starts: just after the instruction that produced it (its
    inputs may die at that instruction and lend it their space, as a compiler's allocator does)."""
    f = t._fresh
    return ctx.trace.resolve(f[1]) + 1 if f is not None and f[0] is ctx else None


# the op that makes a compiler-inserted copy: elementwise.tensor_copy, registered by the
# elementwise module when it is imported (it imports this one; trnsim.nki.ops imports both)
_STAGE_COPY: list = []


def register_stage_copy(fn) -> None:
    """Install the ``tensor_copy`` that ``implicit_copy`` traces."""
    _STAGE_COPY[:] = [fn]


def implicit_copy(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> NkiTensor:
    """A compiler-inserted PSUM -> SBUF copy (Vector), traced with ``implicit=True``."""
    src = tile(ctx, t, role, op, "vector")
    cp = _STAGE_COPY[0](None, src, opcode="tensor_copy")
    if cp._fresh is not None:
        i = ctx.trace.resolve(cp._fresh[1])
        ctx.trace.patch(i, attrs=ctx.trace.instructions[i].attrs + (("implicit", True),))
    return cp


def check_engine_access(ctx: KernelContext, engine: str, memory: str, mode: str, op: str, role: str,
                        t: NkiTensor) -> None:
    """Raise unless ``engine`` may read/write (``mode``) ``memory`` (hardware data)."""
    if engine == "sync":
        return
    acc = getattr(ctx.spec.engines, engine)
    allowed = getattr(acc, memory)
    if mode not in allowed:
        verb = "read" if mode == "r" else "write"
        raise MemoryAccessError(f"{op}: the {engine} engine cannot {verb} {memory.upper()} "
                                f"({role} '{t.name}')",
                                rule=f"{engine}-{memory}-access",
                                limit=f"{engine} engine {memory}: '{allowed or 'no access'}'",
                                value=verb, where=where())


def check_partitions(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    """Raise when ``t`` spans more partitions than the core has."""
    p = t.shape[0]
    pmax = ctx.spec.tile_size.pmax
    if p > pmax:
        raise PartitionError(f"{op}: {role} '{t.name}' spans {p} partitions",
                             rule="err_num_partition_exceed_arch_limit", limit=pmax, value=p,
                             where=where())


def check_alignment(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    """Compute engines address partitions in aligned groups (start 0/32/64/96 by size) [ARCH2]."""
    if t._gather is not None or t._st.memory == "hbm":
        return
    if t._strides[0] == 0:
        return
    p0 = t._off // t._st.pstride if t._st.pstride else 0
    n = t.shape[0]
    for max_parts, align in ctx.spec.access.partition_alignment:
        if n <= max_parts:
            if p0 % align:
                raise PartitionError(
                    f"{op}: {role} '{t.name}' starts at partition {p0} with {n} partitions",
                    rule="partition-start-alignment",
                    limit=f"<= {max_parts} partitions must start at a multiple of {align}",
                    value=p0, where=where())
            return


def check_free_size(ctx: KernelContext, t: NkiTensor, role: str, op: str) -> None:
    """Raise when ``t`` addresses more elements per partition than one access may."""
    if t._st.memory == "psum":
        # the PSUM figure is the partition's whole extent (16 KiB = 4096 fp32): it limits the
        # elements an access addresses, so a stride-0 (broadcast) dim counts once; AWS's own
        # trn2 kernels read a (P, n) PSUM tile broadcast to (P, n, k) past 4096 (cores.toml)
        free = 1
        for n, s in zip(t._shape[1:], t._strides[1:]):
            if s:
                free *= n
        lim = ctx.spec.access.max_free_elements_psum
    else:
        free = t.size // t.shape[0]
        lim = ctx.spec.access.max_free_elements_sbuf
    if free > lim:
        raise ShapeError(f"{op}: {role} '{t.name}' has {free} elements per partition",
                         rule=f"{t._st.memory}-free-size", limit=lim, value=free, where=where())


def same_partitions(a: NkiTensor, b: NkiTensor, op: str, ra: str, rb: str) -> None:
    """Raise unless ``a`` and ``b`` have the same number of partitions."""
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"{op}: {ra} has {a.shape[0]} partitions but {rb} has {b.shape[0]}",
                         rule="err_num_partition_mismatch", limit=a.shape[0], value=b.shape[0],
                         where=where())


def read(ctx: KernelContext, t: NkiTensor, what: str, mask=None):
    """(values in storage dtype, init map or None).  Checks manual-allocation clobbering."""
    if t._gather is not None:
        idx = check_gather_bounds(t, mask)
        base = t._gather.base
        arr = base.array()
        if mask is None:
            vals = arr[idx]
            init = None
            if not base._st.full:
                iv = base.init_view()[idx]
                init = None if iv.all() else iv
        else:
            vals = np.zeros(t.shape, dtype=arr.dtype)
            sel = tuple(i[mask] for i in idx)
            vals[mask] = arr[sel]
            init = None
            if not base._st.full:
                iv = np.ones(t.shape, np.uint8)
                iv[mask] = base.init_view()[sel]
                init = None if iv.all() else iv
        if init is not None:
            ctx.note_uninit_read(base, what)
        return vals, init
    st = t._st
    arr = t.array()
    init = None
    if not st.full:
        iv = t.init_view()
        ok = iv.all() if mask is None else iv[mask].all()
        if not ok:
            ctx.note_uninit_read(t, what)
            init = iv
    if st.manual:
        check_owner(ctx, t, what)
    return arr, init


def check_owner(ctx: KernelContext, t: NkiTensor, what: str) -> None:
    """A manually placed tile must still hold its own data: no other tensor (or another block of
    a mod_alloc tensor) may have written those bytes since."""
    mm = ctx.manual(t._st.memory)
    me = mm.owner_id(t._owner, _owner_label(t))
    ov = _owner_view(mm, t)
    iv = t.init_view()
    bad = ov != me
    if iv is not None:
        bad &= iv != 0
    bad &= ov != 0
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        other = int(ov[pos])
        ps = t._st.pstride
        at = t._off + sum(i * s for i, s in zip(pos, t._strides))
        lo = t._off % ps
        hi = lo + max(0, sum((n - 1) * s for n, s in zip(t.shape[1:], t._strides[1:]))) + t.itemsize
        raise AliasError(f"{what} reads '{_owner_label(t)}' but its bytes were overwritten by "
                         f"'{mm.owner_names.get(other, '?')}' (manual allocations overlap while both "
                         "are live)", rule="manual-allocation-alias",
                         limit=f"bytes {lo}..{hi - 1} of each partition owned by '{_owner_label(t)}' "
                               "until its last read",
                         value=f"'{mm.owner_names.get(other, '?')}' wrote partition {at // ps}, "
                               f"byte {at % ps}",
                         where=where(),
                         hint="give the tensors disjoint base_addr ranges, or finish reading the "
                              "first before writing the second")


def written(ctx: KernelContext, t: NkiTensor, what: str) -> np.ndarray:
    """Where ``t`` holds values it wrote itself, so PSUM accumulation continues there (elsewhere
    a new accumulation group starts)."""
    # A manually placed tensor (or mod_alloc block) that has not written yet starts fresh on
    # whatever an earlier, dead tensor left in its bytes (intended reuse); once it has written,
    # finding another tensor's data there means it was clobbered while live (AliasError).
    w = t.init_view() != 0
    if t._st.manual:
        mm = ctx.manual(t._st.memory)
        me = mm.owner_id(t._owner, _owner_label(t))
        if me not in mm.wrote:
            return np.zeros_like(w)
        check_owner(ctx, t, what)
        w &= _owner_view(mm, t) == me
    return w


def _owner_label(t: NkiTensor) -> str:
    o = t._owner
    if isinstance(o, tuple) and len(o) == 2 and isinstance(o[1], tuple) and o[1]:
        return f"{t.name}[block {', '.join(map(str, o[1]))}]"
    return t.name


def _owner_view(mm, t: NkiTensor) -> np.ndarray:
    return np.ndarray(t.shape, dtype=np.int32, buffer=mm.owner, offset=4 * t._off,
                      strides=tuple(4 * s for s in t._strides))


_SHADOWED = frozenset([dt.bfloat16, dt.float16])


def read_f32(ctx: KernelContext, t: NkiTensor, what: str):
    """``read`` converted to fp32; 16-bit float tiles come from the storage's cached fp32 copy
    (``Storage.f32_view``; manually placed storages alias each other, so they convert afresh)."""
    st = t._st
    if st.sdtype in _SHADOWED and not st.manual and t._gather is None and ctx.numerics:
        if fastpath.QUEUED and st.memory == "psum":  # a 16-bit view of queued PSUM bytes
            fastpath.drain()
        # read() checks init marks and manual owners: a full automatic storage has neither
        init = None if st.full else read(ctx, t, what)[1]
        return st.f32_view(t._off, t._shape, t._strides), init
    v, init = read(ctx, t, what)
    return (f32(v) if ctx.numerics else v), init


def f32(v: np.ndarray) -> np.ndarray:
    """``v`` as fp32 (no copy when it already is)."""
    return v if v.dtype == np.float32 else v.astype(np.float32)


def and_init(shape: Tuple[int, ...], *inits) -> Optional[np.ndarray]:
    """Elementwise propagation: a result is initialized where all its inputs were."""
    out = None
    for i in inits:
        if i is None:
            continue
        i = _align(i, shape)
        out = i.astype(bool) if out is None else (out & (i != 0))
    return out


def _align(v: np.ndarray, shape) -> np.ndarray:
    if v.shape == tuple(shape):
        return v
    if v.ndim < len(shape):
        v = v.reshape(v.shape + (1,) * (len(shape) - v.ndim))
    return np.broadcast_to(v, shape)


def out_dtype(ctx: KernelContext, dtype_arg, *inputs) -> np.dtype:
    """The result dtype: ``dtype_arg`` (checked for the target) or the inputs' promotion."""
    if dtype_arg is not None:
        d = dt.as_dtype(dtype_arg)
        check_dtype_supported(ctx, d)
        return d
    d = None
    for x in inputs:
        xd = x.dtype if isinstance(x, NkiTensor) else None
        if xd is None:
            continue
        d = xd if d is None else dt.promote(d, xd)
    return d if d is not None else dt.float32


def active_free(mask, free: int) -> int:
    """Elements per partition a masked instruction touches (the most over its partitions): the
    compiler lowers an affine mask into the access pattern; ``free`` when the mask is not an
    array or leaves every free element of some partition active."""
    if not isinstance(mask, np.ndarray) or mask.ndim < 2 or free <= 1:
        return free
    # undo broadcasting (stride-0 axes) before counting: masks are broadcast views of index
    # comparisons, and counting the full (P, F) view would cost a pass over every element
    st, shp = mask.strides, mask.shape
    base = mask[tuple(slice(0, 1) if (s == 0 and n > 1) else slice(None) for s, n in zip(st, shp))]
    rep = 1
    for s, n in zip(st[1:], shp[1:]):
        if s == 0:
            rep *= n
    m = base.reshape(base.shape[0], -1)
    k = int(m.sum(axis=1).max()) * rep
    return k if k < free else free


def op_mask(mask, shape):
    """Normalize ``mask=`` to None / False / bool array over the op's iteration space."""
    return mask_values(mask, tuple(shape))


def scalar_or_column(ctx: KernelContext, x, shape, role: str, op: str, engine: str):
    """A scalar operand or a (P, 1) per-partition column broadcast along the free dims.

    Returns (values broadcastable to ``shape``, init or None, the tile or None)."""
    if isinstance(x, NkiTensor):
        t = tile(ctx, x, role, op, engine)
        if t.shape[0] != shape[0] and t.shape[0] != 1:
            raise ShapeError(f"{op}: {role} must have {shape[0]} partitions (or 1)",
                             rule="err_num_partition_mismatch", limit=shape[0], value=t.shape[0],
                             where=where())
        free = t.size // t.shape[0]
        if free != 1:
            raise ShapeError(f"{op}: {role} must be a scalar or a (P, 1) column, got shape {t.shape}",
                             rule="scalar-operand-shape", limit="(P, 1)", value=t.shape,
                             where=where())
        v, init = read(ctx, t, role)
        v = f32(v).reshape((t.shape[0],) + (1,) * (len(shape) - 1))
        if init is not None:
            init = init.reshape(v.shape)
        return v, init, t
    if isinstance(x, (int, float, np.integer, np.floating, bool, np.bool_, np.generic)):
        return np.float32(x), None, None  # np.generic: ml_dtypes scalars such as bfloat16(1)
    raise KernelError(f"{op}: {role} must be a scalar or a (P, 1) tile, got {type(x).__name__}",
                      rule="operand-type", value=type(x).__name__, where=where())


def _flat(t: NkiTensor) -> int:
    return t.size // t.shape[0]


def _same_layout(a: NkiTensor, b: NkiTensor, op: str, ra: str, rb: str) -> None:
    same_partitions(a, b, op, ra, rb)
    if _flat(a) != _flat(b):
        raise ShapeError(f"{op}: {ra} {a.shape} and {rb} {b.shape} differ in elements per partition",
                         rule="shape-mismatch", limit=_flat(a), value=_flat(b), where=where())


def _rows_init(P, n, *inits):
    ok = None
    for i in inits:
        if i is None:
            continue
        r = np.asarray(i).reshape(P, -1).all(axis=1)
        ok = r if ok is None else ok & r
    return None if ok is None else np.repeat(ok[:, None], n, axis=1)
