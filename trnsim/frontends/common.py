"""Front-end pieces both public faces share: tile_size, dtype limits, nc_version, iterators, program
ids, host-side casts, and the registration of ``nl.*`` functions as ALU tokens."""
from __future__ import annotations

import builtins
from enum import IntEnum
from typing import Any, Callable

import numpy as np

from ..errors import KernelError, TileSizeFieldError
from ..options import Options
from ..nki.core import dtypes as dt
from ..nki.core import fastforward
from ..nki.core import races
from ..nki.core.alu import register_token
from ..nki.core.context import current, maybe_current


def _core_spec():
    ctx = maybe_current()
    if ctx is not None:
        return ctx.spec
    from ..hardware import load_catalog
    opts = Options.from_env()
    return load_catalog(opts.hardware_file).core_for(opts.target)


def _tile_field(name: str) -> property:
    """A ``tile_size`` field read from the current target's hardware data."""
    return property(lambda self: getattr(_core_spec().tile_size, name))


class _TileSize:
    """``nl.tile_size`` of the new ``nki`` API: plain ints for the current (or environment-selected)
    generation, from the hardware data files (``[vN.tile_size]``, ``[vN.sbuf]``, ``[vN.psum]``).

    Fields as documented for NKI 0.6 (nki.language.tile_size.rst): ``pmax``, ``psum_fmax``
    (deprecated) / ``psum_bank_fmax``, ``psum_bank_fmax_bytes``, ``psum_num_banks``,
    ``sbuf_size_bytes`` (all partitions), ``sbuf_fmax`` (fp32 elements) / ``sbuf_fmax_bytes``
    (usable bytes per partition), ``gemm_stationary_fmax``, ``gemm_moving_fmax``,
    ``bn_stats_fmax``, ``psum_min_align``, ``sbuf_min_align`` and ``total_available_sbuf_size``
    (deprecated; usable bytes per partition, the same value as ``sbuf_fmax_bytes``)."""

    FIELDS = ("pmax", "psum_fmax", "psum_bank_fmax", "psum_bank_fmax_bytes", "psum_num_banks",
              "sbuf_size_bytes", "sbuf_fmax", "sbuf_fmax_bytes", "gemm_stationary_fmax",
              "gemm_moving_fmax", "bn_stats_fmax", "psum_min_align", "sbuf_min_align",
              "total_available_sbuf_size")

    pmax = _tile_field("pmax")
    psum_fmax = psum_bank_fmax = _tile_field("psum_fmax")
    psum_num_banks = _tile_field("psum_num_banks")
    gemm_stationary_fmax = _tile_field("gemm_stationary_fmax")
    gemm_moving_fmax = _tile_field("gemm_moving_fmax")
    bn_stats_fmax = _tile_field("bn_stats_fmax")
    psum_min_align = _tile_field("psum_min_align")
    sbuf_min_align = _tile_field("sbuf_min_align")

    @property
    def psum_bank_fmax_bytes(self) -> int:
        """Bytes of one PSUM bank per partition."""
        return _core_spec().psum.bank_bytes

    @property
    def total_available_sbuf_size(self) -> int:
        """Usable SBUF bytes *per partition* (the name is misleading; deprecated in NKI 0.4)."""
        return _core_spec().sbuf.usable_bytes_per_partition

    @property
    def sbuf_size_bytes(self) -> int:
        """Total SBUF capacity over all partitions, in bytes."""
        sb = _core_spec().sbuf
        return sb.partitions * sb.bytes_per_partition

    @property
    def sbuf_fmax_bytes(self) -> int:
        """Usable SBUF free size of one partition, in bytes."""
        return _core_spec().sbuf.usable_bytes_per_partition

    @property
    def sbuf_fmax(self) -> int:
        """Usable SBUF free size of one partition, in fp32 elements."""
        return _core_spec().sbuf.usable_bytes_per_partition // 4

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from ..source import describe, user_loc
        raise TileSizeFieldError(f"nki.language.tile_size has no field {name!r}",
                                 limit=", ".join(self.FIELDS), value=name,
                                 where=describe(user_loc()))

    def __dir__(self):
        return list(self.FIELDS)

    def __repr__(self):
        return f"tile_size(pmax={self.pmax}, psum_fmax={self.psum_fmax}, ...)"


tile_size = _TileSize()


class _LegacyTileSize:
    """``neuronxcc.nki.language.tile_size``: the NKI 0.1 fields only (bn_stats_fmax,
    gemm_moving_fmax, gemm_stationary_fmax, pmax, psum_fmax, psum_min_align, sbuf_min_align,
    total_available_sbuf_size; legacy docs 1db4d74e nki.language.tile_size.rst), same values as
    the new API's for the target generation."""

    FIELDS = ("bn_stats_fmax", "gemm_moving_fmax", "gemm_stationary_fmax", "pmax", "psum_fmax",
              "psum_min_align", "sbuf_min_align", "total_available_sbuf_size")

    def __getattr__(self, name):
        if name in self.FIELDS:
            return getattr(tile_size, name)
        if name.startswith("__"):
            raise AttributeError(name)
        from ..source import describe, user_loc
        hint = ("a field of the new nki API's nl.tile_size (NKI >= 0.2); the legacy neuronxcc.nki "
                "one has only these") if name in _TileSize.FIELDS else None
        raise TileSizeFieldError(f"neuronxcc.nki.language.tile_size has no field {name!r}",
                                 limit=", ".join(self.FIELDS), value=name,
                                 where=describe(user_loc()), hint=hint)

    def __dir__(self):
        return list(self.FIELDS)

    def __repr__(self):
        return f"tile_size(pmax={self.pmax}, psum_fmax={self.psum_fmax}, ...)"


legacy_tile_size = _LegacyTileSize()


class _Limits:
    def __init__(self, d):
        f = dt.finfo(d)
        self.min = float(f.min)
        self.max = float(f.max)
        self.eps = float(getattr(f, "eps", 0))
        self.tiny = float(getattr(f, "tiny", 0))


fp32 = _Limits(dt.float32)
bfp16 = _Limits(dt.bfloat16)


def finfo(d):
    """Machine limits of an NKI float dtype (ml_dtypes' finfo)."""
    return dt.finfo(d)


class NcVersion(IntEnum):
    """``nisa.nc_version``: compared with >= in kernels.  The members are NKI's documented names; a
    generation the hardware data adds later (a what-if core) is a pseudo-member ``gen<N>``."""
    gen2 = 2
    gen3 = 3
    gen4 = 4

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            member = int.__new__(cls, value)
            member._name_ = f"gen{value}"
            member._value_ = value
            return member
        return None


def get_nc_version() -> NcVersion:
    """The target core's generation (``nisa.get_nc_version()``), from the hardware data."""
    return NcVersion(_core_spec().generation)


def get_nc_sub_version() -> int:
    """The core's sub-version (0: the simulator models no sub-versions)."""
    return 0


def _ints(*a):
    out = []
    for x in a:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise KernelError("loop bounds must be integers known when the kernel is traced",
                              rule="loop-bounds", value=repr(x))
        out.append(int(x))
    return out


def _loop(r, traced_once: bool, fast: bool = False, parallel: bool = False):
    """Iterate ``r``, recording in the kernel context which iteration of which loop is running.

    Legacy NKI traces the body of affine/sequential loops once, so Python side effects in the body
    (e.g. ``cur_addr += size`` between manual allocations) happen once; allocation uses this to
    give later iterations the placement of the first (see alloc.py).  ``fast``: a loop whose body
    may be fast-forwarded in timing-only runs (see core/fastforward.py).  ``parallel``: iterations
    in no defined order (``affine_range``): where each starts is kept for the race check
    (core/races.py), which runs when the loop ends."""
    ctx = maybe_current()
    if ctx is None:
        yield from r
        return
    frame = [0, traced_once]
    ctx.loops.append(frame)
    rec = races.LoopRecord(r) if parallel and len(r) > 1 and ctx.options.race_check else None
    marks = rec.marks if rec is not None else None
    tr = ctx.trace

    def at(k: int) -> None:
        frame[0] = k
        if marks is not None:
            marks.extend((k, len(tr.instructions), tr.remap_epoch()))

    try:
        if fast and fastforward.enabled(ctx):
            yield from fastforward.loop(ctx, r, at)
        elif marks is not None:
            for k, i in enumerate(r):
                at(k)
                yield i
        else:
            for k, i in enumerate(r):
                frame[0] = k
                yield i
        if rec is not None:
            races.end_loop(ctx, rec)
    finally:
        for j in range(len(ctx.loops) - 1, -1, -1):  # by identity: equal frames are distinct loops
            if ctx.loops[j] is frame:
                del ctx.loops[j]
                break


def affine_range(*args, **kw):
    """Iterations without carried dependencies (the simulator runs them in order; overlapping
    accesses between iterations are reported as races, see core/races.py)."""
    return _loop(builtins.range(*_ints(*args)), True, True, True)


def sequential_range(*args, **kw):
    """Iterations with carried dependencies (traced once, run in order)."""
    return _loop(builtins.range(*_ints(*args)), True, True)


def static_range(*args, **kw):
    """Unrolled at trace time: every iteration is traced."""
    return _loop(builtins.range(*_ints(*args)), False)


def program_id(axis: int = 0) -> int:
    """This instance's index along axis of the launch grid (0 without a grid)."""
    ctx = current()
    races.note_program_id(ctx)  # programs that never ask are replicas (races.py)
    if not ctx.program_id:
        return 0
    if not 0 <= int(axis) < len(ctx.program_id):
        raise KernelError(f"program_id axis {axis} outside the launch grid {ctx.grid}",
                          rule="program-id-axis", limit=len(ctx.program_id), value=axis)
    return int(ctx.program_id[int(axis)])


def num_programs(axes=None) -> int:
    """The number of instances along axes of the launch grid (all axes: None)."""
    ctx = current()
    grid = ctx.grid or ()
    if axes is None:
        n = 1
        for g in grid:
            n *= g
        return n
    if isinstance(axes, (tuple, list)):
        n = 1
        for a in axes:
            n *= grid[int(a)] if int(a) < len(grid) else 1
        return n
    a = int(axes)
    return grid[a] if a < len(grid) else 1


def program_ndim() -> int:
    """The number of launch-grid dims."""
    return len(current().grid or ())


def static_cast(input_data, dtype):
    """Host-side cast of a numpy array or scalar (``nl.static_cast``), RNE via ml_dtypes."""
    d = dt.as_dtype(dtype)
    a = np.asarray(input_data)
    if a.dtype == d:
        return a.copy()
    if dt.is_packed(d) or dt.is_packed(a.dtype):  # x4 MX: 4 values per element (pack / unpack)
        from ..nki.ops.mx_format import static_cast_x4
        return static_cast_x4(a, d)
    if d in dt.LOW_PRECISION_FLOATS and a.dtype.kind in "iu":
        a = a.astype(np.float32)
    if a.dtype in dt.LOW_PRECISION_FLOATS and d.kind in "iu":
        a = a.astype(np.float32)
    return a.astype(d)


def device_print(prefix, tensor=None, *args, **kw):
    """Print a tensor's values from inside a kernel (simulator only)."""
    from ..nki.core.tensor import NkiTensor
    t = tensor if tensor is not None else (args[0] if args else None)
    if isinstance(t, NkiTensor):
        print(prefix, np.asarray(t.array()).astype(np.float32) if t.dtype in dt.LOW_PRECISION_FLOATS
              else t.array())
    else:
        print(prefix, t)


def alu(name: str, fn: Callable) -> Callable:
    """Register an ``nl.*`` function as the ALU/activation token ``name``."""
    register_token(fn, name)
    return fn
