"""The hot statement of tiled matmul kernels, ``psum += nisa.nc_matmul(a_view, b_view)``, fused.

``nc_matmul`` with every flag at its default, of fully written, automatically placed SBUF tiles,
whose shape was already checked once (``ctx.op_plans``), and its accumulation into a fully written
fp32 PSUM tile: the general path's steps (matmul.py, base.emit_fresh, assign.accumulate_into) with
the checks that cannot fail for such operands left out and the calls between them inlined.  Each
function returns None / False when its case does not hold, and the caller takes the general
path, which stays the reference (``TRNSIM_FASTPATH=0`` takes it always); tests/nki/
test_fastpath_kernels.py and test_fastpath_hot_matmul.py hold both to the same bits and the same
trace.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...ir.trace import Instruction, Region
from ...source import user_loc
from ..core import dtypes as dt, fastpath
from ..core.context import region
from ..core.fastpath import product_buffers
from ..core.storage import Storage
from ..core.tensor import NkiTensor

_SHADOWED = (dt.bfloat16, dt.float16)  # read through the storage's cached fp32 copy (f32_view)
_F32 = dt.float32
_U8 = np.dtype(np.uint8)
_tuple_new = tuple.__new__
# the product's trace attrs as the accumulation rewrites them, per plan attrs tuple
_ACC_ATTRS: dict = {}
_ACC_ATTRS_MAX = 256


def _operand(t) -> Optional[np.ndarray]:
    """The fp32 values of a fully written automatic SBUF tile, or None for any other operand."""
    if type(t) is not NkiTensor or t._fresh is not None or t._pdim != 0 or \
            t._blocks is not None or t._gather is not None:
        return None
    st = t._st
    if st.memory != "sbuf" or not st.full or not st.accounted or st.manual:
        return None
    sd = st.sdtype
    if sd in _SHADOWED:
        return st.f32_view(t._off, t._shape, t._strides)
    if sd == _F32:
        return t.array()
    return None


def product(ctx, s, mv, opcode: str) -> Optional[NkiTensor]:
    """``nc_matmul(None, s, mv)`` with default flags as a fresh PSUM tile, or None when the case
    is not the hot one (the caller runs the general path)."""
    if not ctx.numerics or not fastpath.ON:
        return None
    plan = ctx.op_plans.get((opcode, s._shape, s._dtype, mv._shape, mv._dtype)) \
        if type(s) is NkiTensor and type(mv) is NkiTensor else None
    if plan is None:  # not checked yet: the general path checks and caches the plan
        return None
    K, M, N, mode, od, sname, out_shape, attrs = plan
    if mode is not None or od is not _F32:
        return None
    vs = _operand(s)
    if vs is None:
        return None
    vm = _operand(mv)
    if vm is None:
        return None
    a = vs if vs.ndim == 2 and vs.shape[1] == M else vs.reshape(-1, M)
    b = vm if vm.ndim == 2 and vm.shape[1] == N else vm.reshape(-1, N)
    spare = product_buffers.take((M, N))
    vals = a.T @ b if spare is None else np.matmul(a.T, b, out=spare)
    if vals.shape != out_shape:
        vals = vals.reshape(out_shape)
    if vals.base is not None:  # a reshaped view: copied once, as base._adopt does
        vals = vals.copy(order="C")
    loc = user_loc()
    rs = s._region or region(s)
    rm = mv._region or region(mv)
    # base._adopt, inlined: the product array becomes the fresh tile's storage (without a dst,
    # out_shape is (M, N))
    nb = N * 4
    st = Storage(memory="psum", kind="psum", name=f"t{next(ctx.name_counter)}",
                 nbytes=vals.nbytes, sdtype=_F32, partitions=M, pstride=nb, loc=loc,
                 data=vals.reshape(-1).view(_U8), full=True)
    out = NkiTensor(st, 0, out_shape, vals.strides, od, 0)
    # context.fresh_region, inlined
    reg = out._region = _tuple_new(Region, ("psum", st.region_id, st.name, 0, M, 0, nb, M * N,
                                            "float32", nb, False))
    out._arr = vals
    # ctx.record(..., fresh_writes=True), inlined: two SBUF reads, the fresh tile written
    if ctx.pending_zero:
        ctx._resolve_pending_zero("tensor", (rs, rm), (reg,), loc)
    tr = ctx.trace
    il = tr.instructions
    idx = il._n
    ids = tr._interned_ids
    ra = ids.get(id(rs)) or tr.intern(rs)
    rb = ids.get(id(rm)) or tr.intern(rm)
    sbuf = ctx.sbuf
    sbuf.touch(ra.tensor, idx)
    sbuf.touch(rb.tensor, idx)
    il.append(_tuple_new(Instruction, (idx, "tensor", opcode, (ra, rb), (reg,), K, N, sname,
                                       "float32", attrs, loc, ctx.core_id)))
    out._fresh = (ctx, idx, "tensor", opcode)
    return out


def accumulate(ctx, dst: NkiTensor, prod: NkiTensor, recycle) -> bool:
    """``dst += prod`` for a temporary, unmasked fp32 product and a fully written fp32 PSUM tile:
    the read-add-write in place and the product's instruction re-pointed at ``dst``; False (and
    nothing done) for any other case."""
    if not fastpath.ON or not ctx.numerics:
        return False
    dst_st = dst._st
    vals = prod._arr
    if prod._mask is not None or vals is None or dst._dtype is not _F32 or not dst_st.full or \
            dst_st.manual or dst_st.readonly or dst_st.sdtype is not _F32 or \
            ctx.convert.stochastic or not prod._st.full or dst._gather is not None or \
            "float32" not in ctx.spec.tensor.output_dtypes:
        return False
    tr = ctx.trace
    tail = tr.instructions.plain_list()
    if tail is None or tr._remaps:  # loop blocks or remapped indices: the general path resolves
        return False
    old = dst._arr
    if old is None:
        old = dst.array()
    if vals.shape != old.shape:
        if vals.size != old.size:
            return False
        vals = vals.reshape(old.shape)
    f = prod._fresh
    idx = f[1]
    prod._fresh = None
    np.add(old, vals, out=old)  # fp32 PSUM read-add-write, in place
    dst_st._f32 = None
    recycle(prod, prod._arr)
    ins = tail[idx]
    dreg = tr.intern(dst._region or region(dst))
    attrs = ins.attrs
    got = _ACC_ATTRS.get(id(attrs))
    if got is None or got[0] is not attrs:
        if attrs and attrs[0][0] == "accumulate":  # where nc_matmul puts it
            new_attrs = attrs[1:]
        else:
            new_attrs = tuple((k, v) for k, v in attrs if k != "accumulate")
        if len(_ACC_ATTRS) > _ACC_ATTRS_MAX:  # one entry per plan: bounded across launches
            _ACC_ATTRS.clear()
        got = _ACC_ATTRS[id(attrs)] = (attrs, new_attrs + (("accumulate", True),))
    tail[idx] = _tuple_new(Instruction, (
        ins.index, ins.engine, ins.opcode, ins.reads + (dreg,), (dreg,) + ins.writes[1:],
        ins.partitions, ins.free, ins.dtype_in, "float32", got[1], ins.source, ins.core))
    # ctx.touch, inlined: the accumulator (PSUM) is written by this instruction
    pz = ctx.pending_zero
    if pz:
        pz.pop(dreg.tensor, None)
    ctx.psum.touch(dreg.tensor, idx, True)
    return True
