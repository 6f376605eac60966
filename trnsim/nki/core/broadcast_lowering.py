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
Each consuming instruction gets its own copy (the docs do not say whether the compiler shares one
between two consumers of the same view), not counted against PSUM/SBUF capacity (it lives from the
inserted instruction to its consumer only).
"""
from __future__ import annotations

from typing import List, Tuple

from ...ir.trace import Region
from ...source import user_loc
from . import dtypes as dt
from . import storage as _storage
from .context import KernelContext, region
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


def lower(ctx: KernelContext, t: NkiTensor, engine: str) -> NkiTensor:
    """Trace the broadcast of stride-0-partition view ``t`` for ``engine`` and return a view with
    the same values whose trace region is the broadcast copy (``t`` itself under "free")."""
    how = lowering(ctx, t, engine)
    if how == "free":
        return t
    P = t._shape[0]
    F = distinct_free(t)
    elements = 1
    for c in t._shape:
        elements *= c
    row = region(t._derive(t._off, (1,) + t._shape[1:], t._strides))
    loc = user_loc()
    sid = next(_storage._ids)  # the copy's allocation id: a fresh tile's (fast-forward sees it so)
    name = f"{t.name}_pbcast"
    src_dtype = dt.name(t._dtype)
    if how == "tensor":
        dname, isz = _PSUM_DTYPE, dt.as_dtype(_PSUM_DTYPE).itemsize
        _trace_matmuls(ctx, row, sid, name, P, F, src_dtype, t._st.sdtype.itemsize, loc)
        memory = "psum"
    else:
        dname, isz = src_dtype, t._st.sdtype.itemsize  # region bytes are storage bytes
        dst = Region("sbuf", sid, name, 0, P, 0, F * isz, P * F, dname, F * isz, False)
        ctx.record("dma", OPCODE, [row], [dst], P, F, src_dtype, dname,
                   (("direction", "sbuf->sbuf"), ("lowering", "dma")), loc)
        memory = "sbuf"
    v = t._derive(t._off, t._shape, t._strides)
    v._mask = t._mask
    v._region = Region(memory, sid, name, 0, P, 0, F * isz, elements, dname, _run(t) * isz, False)
    return v


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
