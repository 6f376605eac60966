"""Microscaling (MX) on NeuronCore-v4: ``nc_matmul_mx`` (Tensor engine) and ``quantize_mx``
(Vector engine), plus host helpers to pack/unpack the x4 data types and lay out scales.

Sources (mirror ``aws-neuron/aws-neuron-sdk``): ``nki/api/nki/isa/__init__.py`` (docstrings of
``nc_matmul_mx`` / ``quantize_mx``) [ISA], ``nki/deep-dives/mxfp-matmul.rst`` and its
``src/mxfp-matmul/*.py`` [MX], ``nki/guides/architecture/trainium3_arch.rst`` [ARCH4].

Data layout [ARCH4][MX].  An MX data tile is ``[P, F]`` of x4-packed elements in SBUF: each
``float8_*_x4`` element is a 32-bit word holding four fp8 values, each ``float4_e2m1fn_x4``
element a 16-bit word holding four fp4 values.  Value ``j`` (0..3) of a word sits in byte ``j``
(fp8) or nibble ``j`` (fp4), least significant first -- the little-endian ``ml_dtypes`` view the
docs' CPU utilities use.  The contraction runs over the partitions *and* the four packed values,
so one instruction contracts ``4 * P`` (up to 512) elements.

Scale layout [ARCH4][MX][ISA].  One 8-bit scale (``uint8`` or ``float8_e8m0fnu``, value
``2^(s - 127)``, ``0xFF`` = NaN) per scaling group of 32 elements = 8 partitions x one x4
column.  Scaling groups never cross a 32-partition quadrant, and each quadrant's 4 scale rows
live *in that quadrant*: the scale of data rows ``8b .. 8b+7``, column ``f`` is row
``32 * (b // 4) + b % 4`` of the scale view, column ``f``.  So ``P = 32`` needs a ``[4, F]``
scale tile (``[P // 8, F]``) while ``P > 32`` needs a ``[P, F]`` ("oversized") tile with 28 idle
rows per quadrant.  A scale view may start at partition offset 0, 4, 8 or 12 inside its quadrant,
which packs up to four tensors' scales into one tile (``packed[4:, :]``, the docs' packed-scale
kernel).

Numerics (choices, documented):
- ``nc_matmul_mx`` dequantizes exactly (``element * 2^(scale - 127)``; fp4 widens to fp8
  exactly), forms every product and the whole 4P-deep sum in float64 (products of fp8 values and
  power-of-two scales are exact in float64 and cannot overflow or underflow there), and rounds
  the sum once to fp32.  The PE array accumulates in fp32 [ISA]; the correctly rounded fp32 sum
  is the closest order-independent stand-in for it (hardware may differ from it by the array's
  own fp32 accumulation error, a few ulp).  A bf16 ``dst`` gets that fp32 value rounded to bf16
  (RNE, or SR when enabled), as the fp32->bf16 PSUM write path does [ARCH4].  Accumulation into
  PSUM is an fp32 add of the fp32 result to the (upcast) PSUM value, then the cast to the PSUM
  dtype.
- ``quantize_mx``'s block scale is a data choice, ``numerics.toml`` ``[mx] quantize_scale``:
  ``ocp_x2`` (default) is the [ISA] rule of NKI 0.5.0 / Neuron 2.31.0, ``X = 2^(floor(log2 amax)
  - (Emax - 1))``, Emax 8 (e4m3fn) / 15 (e5m2), twice the OCP sample algorithm's scale, so a
  group's largest value never saturates; ``ocp`` is the OCP sample algorithm ``2^(floor(log2
  amax) - Emax)`` that quantize_mx used before that release (the 2.31.0 release note says it
  "now uses" the larger scale; the NKI library's hardware-validated golden of March/April 2026
  and the docs' ``quantize_mx_golden`` compute it), with values beyond the format's max
  saturated (OCP).  An all-zero group gets ``X = 2^-127`` (scale byte 0); the biased exponent
  is clamped to 0..254.  Elements are ``value / X`` rounded to the fp8 type (RNE, or SR when
  enabled).  Groups holding NaN or Inf are undocumented: trnsim writes scale 0xFF (NaN) and NaN
  elements for them.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...errors import DtypeError, KernelError, MemoryAccessError, ShapeError, UnsupportedError
from ..core import dtypes as dt, gates
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .base import emit, f32, read, tile, where
from .mx_format import (  # noqa: F401  (host helpers re-exported)
    CONTAINER, ELEMENT, EMAX, GROUP_PARTITIONS, MX_DATA, MXFP8_DATA, PACK, QUADRANT, SCALE_BIAS,
    SCALE_DTYPES, SCALE_OFFSETS, SCALE_ROWS_PER_QUADRANT, _lut, _scale_from_amax, _unpack_codes,
    dequantize_x4, gather_scales, pack_x4, quantize_block_scales, scale_factors, scale_rows,
    scatter_scales, unpack_x4)


# -- kernel-side checks --------------------------------------------------------------------------

def _check_generation(ctx, op: str) -> None:
    gates.require(ctx, op)
    gates.require(ctx, "mx")


def _no_gather(t: NkiTensor, role: str, op: str) -> None:
    if t._gather is not None:
        raise UnsupportedError(f"{op}: tensor indirection on {role} is not modelled",
                               rule="mx-indirect", value=t.name, where=where())


def _start_partition(t: NkiTensor) -> int:
    ps = t._st.pstride
    return t._off // ps if ps else 0


def _free(t: NkiTensor) -> int:
    return t.size // t.shape[0]


def _check_data_partitions(t: NkiTensor, role: str, op: str, pmax: int) -> int:
    P = t.shape[0]
    if P % QUADRANT or P > pmax:
        raise ShapeError(f"{op}: {role} '{t.name}' spans {P} partitions; MX data must span a "
                         f"multiple of {QUADRANT} partitions, at most {pmax}",
                         rule="mx-partition-multiple",
                         limit=f"multiple of {QUADRANT}, <= {pmax}", value=P, where=where())
    p0 = _start_partition(t)
    if p0 % QUADRANT:
        raise ShapeError(f"{op}: {role} '{t.name}' starts at partition {p0}; MX scaling groups are "
                         "aligned to 32-partition quadrants", rule="mx-partition-start",
                         limit=f"multiple of {QUADRANT}", value=p0, where=where())
    return P


def _check_scale_dtype(t: NkiTensor, role: str, op: str) -> None:
    if t.dtype not in SCALE_DTYPES:
        raise DtypeError(f"{op}: {role} '{t.name}' is {dt.name(t.dtype)}; MX scales are "
                         "float8_e8m0fnu or uint8", rule="mx-scale-dtype",
                         limit="float8_e8m0fnu, uint8", value=dt.name(t.dtype), where=where())


def _check_scale_layout(scale: NkiTensor, data: NkiTensor, P: int, F: int, role: str, op: str,
                        exact_free: bool) -> None:
    """Scale view geometry for data of P partitions and F x4 columns [ARCH4][MX]."""
    nq = P // QUADRANT
    need = QUADRANT * (nq - 1) + SCALE_ROWS_PER_QUADRANT
    if scale.shape[0] < need:
        layout = f"[{need}, {F}]" if nq == 1 else f"[{P}, {F}] (scales spread over the quadrants)"
        raise ShapeError(f"{op}: {role} '{scale.name}' has {scale.shape[0]} partitions; data of "
                         f"{P} partitions needs a scale tile of at least {need} partitions, e.g. "
                         f"{layout}", rule="mx-scale-partitions", limit=need,
                         value=scale.shape[0], where=where(),
                         hint="scales of quadrant q live in partitions 32q..32q+3 "
                              "(+ offset 0/4/8/12)")
    sf = _free(scale)
    if (exact_free and sf != F) or sf < F:
        raise ShapeError(f"{op}: {role} '{scale.name}' has {sf} elements per partition; the data "
                         f"has {F} x4 columns (one scale per 8 partitions x 1 x4 column)",
                         rule="mx-scale-free-size", limit=F, value=sf, where=where())
    ps = _start_partition(scale)
    pd = _start_partition(data)
    if ps % QUADRANT not in SCALE_OFFSETS:
        raise ShapeError(f"{op}: {role} '{scale.name}' starts at partition {ps}; scales start at "
                         "offset 0, 4, 8 or 12 inside a quadrant", rule="mx-scale-offset",
                         limit=SCALE_OFFSETS, value=ps % QUADRANT, where=where())
    if ps // QUADRANT != pd // QUADRANT:
        raise ShapeError(f"{op}: {role} '{scale.name}' starts in quadrant {ps // QUADRANT} but its "
                         f"data starts in quadrant {pd // QUADRANT}; scales must sit in the "
                         "quadrant of their scaling group", rule="mx-scale-quadrant",
                         limit=pd // QUADRANT, value=ps // QUADRANT, where=where())


def _scale_quadrant_views(scale: NkiTensor, P: int, F: int):
    """The views of a scale tile an instruction touches: rows 32q .. 32q+3 (first F columns) of
    every quadrant q the data spans."""
    s2 = scale if scale.ndim == 2 else scale.reshape(scale.shape[0], -1)
    return [s2[q * QUADRANT: q * QUADRANT + SCALE_ROWS_PER_QUADRANT, 0:F]
            for q in range(P // QUADRANT)]


def _read_scales(ctx, views, op: str):
    """(float64 factors [P // 8, F] or None, init [P // 8, F] bool or None) from the quadrant
    views of a scale tile."""
    vals, inits, any_init = [], [], False
    for v in views:
        a, init = read(ctx, v, op)
        if ctx.numerics:
            vals.append(scale_factors(np.asarray(a)))
        if init is not None:
            any_init = True
            inits.append(np.asarray(init) != 0)
        else:
            inits.append(np.ones(v.shape, bool))
    out = np.concatenate(vals, axis=0) if vals else None
    return out, (np.concatenate(inits, axis=0) if any_init else None)


def _norm_tiling(tile_position, tile_size):
    pos = () if tile_position is None else tuple(int(v) for v in tile_position)
    size = () if tile_size is None else tuple(int(v) for v in tile_size)
    return pos, size


def _check_row_tiling(te, pos, size, K: int, M: int, op: str) -> None:
    """PE tiling for MX: row tiling only (column size 128, start column 0) [ISA][MX]; otherwise
    the ``nc_matmul`` rules (both tuples set, multiples of the tile granularity, inside the array,
    operands within the tile)."""
    if not pos and not size:
        return
    if len(pos) != 2 or len(size) != 2:
        raise KernelError(f"{op}: tile_position and tile_size take (row, column) pairs and must "
                          "both be set", rule="matmul-tiling", value=(pos, size), where=where())
    cols = te.max_stationary_free
    if size[1] != cols or pos[1] != 0:
        raise KernelError(f"{op}: the Tensor engine supports only row tiling for MX (tile_size "
                          f"column must be {cols}, tile_position column 0)",
                          rule="mx-row-tiling-only",
                          limit=(f"column_size {cols}", "start_column 0"), value=(pos, size),
                          where=where())
    g = te.tile_granularity
    rs, rp = size[0], pos[0]
    for v in (rs, rp):
        if v % g:
            raise KernelError(f"{op}: PE tile sizes and positions must be multiples of {g}",
                              rule="matmul-tiling-granularity", limit=g, value=v, where=where())
    if rs <= 0 or rp % rs or rp + rs > te.max_contraction:
        raise KernelError(f"{op}: PE row tile at {rp} of size {rs} is not a tile of the array",
                          rule="matmul-tiling-bounds", limit=te.max_contraction,
                          value=(rp, rs), where=where())
    if K > rs:
        raise ShapeError(f"{op}: {K} partitions exceed the PE row tile of {rs}",
                         rule="matmul-tiling-size", limit=rs, value=K, where=where())


# -- nc_matmul_mx --------------------------------------------------------------------------------

def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """``nisa.nc_matmul_mx``: ``dst = dequant(stationary).T @ dequant(moving)`` (Tensor engine)."""
    # ``stationary`` ``[P, M]`` and ``moving`` ``[P, N]`` are x4-packed MX data in SBUF (contraction
    # ``4 P`` <= 512), with their scales in SBUF in the quadrant layout described in the module doc.
    # ``dst`` is an fp32 or bf16 PSUM tile ``[M, N]``; ``accumulate`` as for ``nc_matmul`` (None:
    # overwrite PSUM locations never written since allocation, add elsewhere). ``dst=None`` returns
    # a fresh fp32 PSUM tile.
    op = "nc_matmul_mx"
    ctx = current()
    _check_generation(ctx, op)
    spec = ctx.spec
    te = spec.tensor
    operands = []
    for x, role in ((stationary, "stationary"), (moving, "moving"),
                    (stationary_scale, "stationary_scale"), (moving_scale, "moving_scale")):
        t = base.need_tensor(x, role, op)
        _no_gather(t, role, op)
        operands.append(tile(ctx, t, role, op, "tensor", memories=("sbuf",)))
    s, mv, ss, ms = operands
    for t, role in ((s, "stationary"), (mv, "moving")):
        if t.dtype not in MX_DATA:
            raise DtypeError(f"{op}: {role} '{t.name}' is {dt.name(t.dtype)}; MX data must be "
                             "float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4",
                             rule="mx-input-dtype",
                             limit="float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4",
                             value=dt.name(t.dtype), where=where(),
                             hint="view packed uint32/uint16 data with .view(nl.float8_e4m3fn_x4)")
    _check_scale_dtype(ss, "stationary_scale", op)
    _check_scale_dtype(ms, "moving_scale", op)
    K = s.shape[0]
    if mv.shape[0] != K:
        raise ShapeError(f"{op}: stationary and moving must share the partition (contraction) dim: "
                         f"{s.shape} vs {mv.shape}", rule="matmul-contraction", limit=K,
                         value=mv.shape[0], where=where())
    _check_data_partitions(s, "stationary", op, te.max_contraction)
    _check_data_partitions(mv, "moving", op, te.max_contraction)
    M = _free(s)
    N = _free(mv)
    if M > te.max_stationary_free:
        raise ShapeError(f"{op}: stationary free size {M} exceeds the PE array columns",
                         rule="matmul-stationary-free", limit=te.max_stationary_free, value=M,
                         where=where())
    if M % 2:
        raise ShapeError(f"{op}: stationary free size {M} must be even",
                         rule="mx-stationary-free-even", limit="even", value=M, where=where())
    _check_scale_layout(ss, s, K, M, "stationary_scale", op, exact_free=False)
    _check_scale_layout(ms, mv, K, N, "moving_scale", op, exact_free=False)
    od = dst.dtype if dst is not None else dt.float32
    on = dt.name(od)
    if on not in te.output_dtypes:
        raise DtypeError(f"{op}: PSUM output dtype {on} is not supported on {spec.name}",
                         rule="matmul-output-dtype", limit=", ".join(te.output_dtypes), value=on,
                         where=where())
    nmax = te.max_moving_free if od.itemsize == 4 else te.max_moving_free_16bit_out
    if N > nmax:
        raise ShapeError(f"{op}: moving free size {N} exceeds the limit for {on} output",
                         rule="matmul-moving-free", limit=nmax, value=N, where=where())
    pos, size = _norm_tiling(tile_position, tile_size)
    _check_row_tiling(te, pos, size, K, M, op)
    out_shape = (M, N)
    if dst is not None:
        dst = base.need_tensor(dst, "dst", op)
        _no_gather(dst, "dst", op)
        if dst._st.memory != "psum":
            raise MemoryAccessError(f"{op}: dst '{dst.name}' must be in PSUM",
                                    rule="matmul-dst-psum", value=dst._st.memory, where=where())
        if dst.size != M * N or dst.shape[0] != M:
            raise ShapeError(f"{op}: dst {dst.shape} does not fit the result ({M}, {N})",
                             rule="dst-shape", limit=out_shape, value=dst.shape, where=where())
        out_shape = dst.shape
    # -- read operands
    vs, i_s = read(ctx, s, op)
    vm, i_m = read(ctx, mv, op)
    ssv = _scale_quadrant_views(ss, K, M)
    msv = _scale_quadrant_views(ms, K, N)
    fs, i_ss = _read_scales(ctx, ssv, op)
    fm, i_ms = _read_scales(ctx, msv, op)
    vals = None
    if ctx.numerics:
        a = _dequant(vs, s.dtype, fs, K, M)    # [K, M, 4]
        b = _dequant(vm, mv.dtype, fm, K, N)   # [K, N, 4]
        a2 = a.transpose(0, 2, 1).reshape(K * PACK, M)
        b2 = b.transpose(0, 2, 1).reshape(K * PACK, N)
        with np.errstate(over="ignore", invalid="ignore"):
            exact = a2.T @ b2                 # float64: exact products, ~exact 4K-deep sum
            vals = exact.astype(np.float32).reshape(out_shape)
    init = _matmul_init(i_s, i_m, i_ss, i_ms, K, M, N, out_shape)
    used = ssv + msv
    attrs = [("accumulate", False), ("mx", True), ("moving_free", N), ("stationary_free", M),
             ("contraction", K * PACK),
             ("mx_dtypes", (dt.name(s.dtype), dt.name(mv.dtype)))]
    if size:
        attrs.append(("tile_size", tuple(int(v) for v in size)))
    sname = dt.name(s.dtype)
    if dst is None:
        return emit(ctx, dst=None, values=vals, init=init, out_shape=out_shape, out_dtype=od,
                    mask=None, engine="tensor", opcode=op, reads=[s, mv] + used, memory="psum",
                    partitions=K, free=N, attrs=attrs, dtype_in=sname)
    base.check_writable(ctx, dst, op)
    if vals is not None:
        old = dst.array()
        with np.errstate(over="ignore", invalid="ignore"):
            if accumulate is True:
                vals = f32(old).reshape(out_shape) + vals
            elif accumulate is None:
                if dst._st.full:
                    vals = f32(old).reshape(out_shape) + vals
                else:
                    vals = np.where(dst.init_view() != 0, f32(old) + vals, vals)
    acc_reads = [s, mv] + used + ([dst] if accumulate is not False else [])
    attrs[0] = ("accumulate", accumulate is not False)
    return emit(ctx, dst=dst, values=vals, init=init, out_shape=out_shape, out_dtype=od, mask=None,
                engine="tensor", opcode=op, reads=acc_reads, memory="psum", partitions=K, free=N,
                attrs=attrs, dtype_in=sname)


def _dequant(words: np.ndarray, container: np.dtype, factors: np.ndarray, K: int, F: int
             ) -> np.ndarray:
    """x4 words [K, F] (storage dtype) and scale factors [K // 8, F] -> float64 [K, F, 4]."""
    elem = ELEMENT[container]
    w = np.asarray(words).reshape(K, F).astype(dt.PACKED_BASE[container], copy=False)
    vals = _lut(elem)[_unpack_codes(w, elem)]                  # [K, F, 4]
    f = np.repeat(factors, GROUP_PARTITIONS, axis=0)           # [K, F]
    with np.errstate(over="ignore", invalid="ignore"):
        return vals * f[:, :, None]


def _matmul_init(i_s, i_m, i_ss, i_ms, K, M, N, out_shape):
    if i_s is None and i_m is None and i_ss is None and i_ms is None:
        return None
    cs = np.ones(M, bool)
    cm = np.ones(N, bool)
    if i_s is not None:
        cs &= np.asarray(i_s).reshape(K, M).all(axis=0) != 0
    if i_ss is not None:
        cs &= i_ss.all(axis=0)
    if i_m is not None:
        cm &= np.asarray(i_m).reshape(K, N).all(axis=0) != 0
    if i_ms is not None:
        cm &= i_ms.all(axis=0)
    return (cs[:, None] & cm[None, :]).reshape(out_shape)


# -- quantize_mx ---------------------------------------------------------------------------------

def _scale_rule(ctx) -> str:
    """The QuantizeMX block-scale rule of the running catalog (``numerics.toml`` ``[mx]``)."""
    return ctx.catalog.numerics["mx"]["quantize_scale"]


def quantize_mx(dst, src, dst_scale, name=None):
    """``nisa.quantize_mx``: fp16/bf16 ``src`` ``[P, F]`` in SBUF -> MXFP8 ``dst`` ``[P, F // 4]``
    (float8_e5m2_x4 / float8_e4m3fn_x4) and one scale per 8 x 4 group in ``dst_scale`` (uint8 /
    float8_e8m0fnu, quadrant layout), on the Vector engine [ISA][ARCH4]."""
    op = "quantize_mx"
    ctx = current()
    _check_generation(ctx, op)
    pmax = ctx.spec.tile_size.pmax
    src_t = base.need_tensor(src, "src", op)
    _no_gather(src_t, "src", op)
    t = tile(ctx, src_t, "src", op, "vector", memories=("sbuf",))
    d = base.need_tensor(dst, "dst", op)
    sc = base.need_tensor(dst_scale, "dst_scale", op)
    for x, role in ((d, "dst"), (sc, "dst_scale")):
        _no_gather(x, role, op)
        if x._st.memory != "sbuf":
            raise MemoryAccessError(f"{op}: {role} '{x.name}' must be in SBUF",
                                    rule="operand-memory", limit="sbuf", value=x._st.memory,
                                    where=where())
        if x._pdim != 0 or x._blocks is not None:
            raise KernelError(f"{op}: {role} '{x.name}' still has block dims",
                              rule="err_failed_to_infer_tile_from_local_tensor", value=x.shape,
                              where=where())
    if t.dtype not in (dt.float16, dt.bfloat16):
        raise DtypeError(f"{op}: src '{t.name}' is {dt.name(t.dtype)}; QuantizeMX reads float16 or "
                         "bfloat16", rule="quantize-mx-input-dtype", limit="float16, bfloat16",
                         value=dt.name(t.dtype), where=where())
    if d.dtype not in MXFP8_DATA:
        raise DtypeError(f"{op}: dst '{d.name}' is {dt.name(d.dtype)}; QuantizeMX writes MXFP8 "
                         "only (float8_e5m2_x4 or float8_e4m3fn_x4)",
                         rule="quantize-mx-output-dtype",
                         limit="float8_e5m2_x4, float8_e4m3fn_x4", value=dt.name(d.dtype),
                         where=where(),
                         hint="MXFP4 (float4_e2m1fn_x4) is an nc_matmul_mx input only")
    _check_scale_dtype(sc, "dst_scale", op)
    P = _check_data_partitions(t, "src", op, pmax)
    F = _free(t)
    if F % PACK:
        raise ShapeError(f"{op}: src free size {F} must be a multiple of {PACK}",
                         rule="quantize-mx-free-multiple", limit=f"multiple of {PACK}", value=F,
                         where=where())
    Fq = F // PACK
    if d.shape[0] != P or _free(d) != Fq:
        raise ShapeError(f"{op}: dst '{d.name}' {d.shape} must be [{P}, {Fq}] (src free size / 4 "
                         "packed elements)", rule="dst-shape", limit=(P, Fq), value=d.shape,
                         where=where())
    _check_scale_layout(sc, t, P, Fq, "dst_scale", op, exact_free=True)
    base.check_engine_access(ctx, "vector", "sbuf", "w", op, "dst", d)
    base.check_writable(ctx, d, op)
    base.check_writable(ctx, sc, op)
    v, init = read(ctx, t, op)
    elem = ELEMENT[d.dtype]
    G = P // GROUP_PARTITIONS
    words = scale_vals = None
    if ctx.numerics:
        x = np.asarray(v, dtype=np.float64).reshape(G, GROUP_PARTITIONS, Fq, PACK)
        amax = np.abs(x).max(axis=(1, 3))                       # [G, Fq] (NaN propagates)
        sbyte, bad = _scale_from_amax(amax, EMAX[elem], _scale_rule(ctx))
        inv = np.ldexp(1.0, SCALE_BIAS - sbyte.astype(np.int64))  # 1 / X, exact
        q = x * inv[:, None, :, None]
        q = np.where(bad[:, None, :, None], np.nan, q)
        fmax = float(ml_dtypes.finfo(elem).max)
        # OCP saturation: binds under the "ocp" rule (|q| up to 2^(Emax+1)), never under "ocp_x2"
        q = np.clip(q, -fmax, fmax).astype(np.float32)
        if ctx.convert.stochastic:
            codes = dt.stochastic_round(q, elem, ctx.convert.rng)
        else:
            codes = q.astype(elem)
        codes = codes.view(np.uint8).reshape(P, Fq, PACK).astype(np.uint32)
        words = np.zeros((P, Fq), np.uint32)
        for j in range(PACK):
            words |= codes[:, :, j] << np.uint32(8 * j)
        words = words.reshape(d.shape)
        scale_vals = sbyte if sc.dtype == dt.uint8 else sbyte.view(dt.float8_e8m0fnu)
    # init: a group's outputs are valid where all 32 inputs were
    ginit = None
    if init is not None:
        gi = (np.asarray(init).reshape(G, GROUP_PARTITIONS, Fq, PACK) != 0).all(axis=(1, 3))
        if not gi.all():
            ginit = gi
    dinit = None
    if ginit is not None:
        dinit = np.repeat(ginit, GROUP_PARTITIONS, axis=0).reshape(d.shape).astype(np.uint8)
    # scales: quadrant q's 4 rows at 32q .. 32q+3 of the scale view
    scale_writes = []
    for q, view in enumerate(_scale_quadrant_views(sc, P, Fq)):
        rows = slice(q * SCALE_ROWS_PER_QUADRANT, (q + 1) * SCALE_ROWS_PER_QUADRANT)
        sv = None if scale_vals is None else scale_vals[rows]
        si = None if ginit is None else ginit[rows].astype(np.uint8)
        base.write(ctx, view, sv, si)
        scale_writes.append(view)
    return emit(ctx, dst=d, values=words, init=dinit, out_shape=tuple(d.shape), out_dtype=d.dtype,
                mask=None, engine="vector", opcode=op, reads=[t], extra_writes=scale_writes,
                partitions=P, free=F, attrs=(("mx", True), ("mx_dtype", dt.name(d.dtype))),
                dtype_in=dt.name(t.dtype))


__all__ = ["nc_matmul_mx", "quantize_mx", "pack_x4", "unpack_x4", "scatter_scales",
           "gather_scales", "scale_rows", "scale_factors", "dequantize_x4", "quantize_block_scales"]
