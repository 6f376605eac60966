"""The hot statement of tiled matmul kernels, ``psum += nisa.nc_matmul(a_view, b_view)``, fused.

``nc_matmul`` with every flag at its default, of fully written, automatically placed SBUF tiles,
whose shape was already checked once (``ctx.op_plans``), and its accumulation into a fully written
fp32 PSUM tile: the general path's steps (matmul.py, base.emit_fresh, assign.accumulate_into) with
the checks that cannot fail for such operands left out and the calls between them inlined.  Each
function returns None / False when its case does not hold, and the caller takes the general
path, which stays the reference (``TRNSIM_FASTPATH=0`` takes it always); tests/nki/
test_fastpath_kernels.py and test_fastpath_hot_matmul.py hold both to the same bits and the same
trace.

Where the user's statement is ``x += nc_matmul(...)`` (read from its bytecode) on 16-bit operands,
the product is not computed at once: its tile's storage is a ``PendingStorage``, and the PSUM
accumulation adds it in with one BLAS call (``fastpath.gemm_acc``: no product temporary, no
separate add pass; tests/nki/test_fastpath_gemm.py), or queues that call for the worker thread
(``fastpath.gemm_submit``, TRNSIM_ASYNC_GEMM; every other read of PSUM drains the queue first,
tests/nki/test_async_gemm.py); any other use computes it on first read.
"""
from __future__ import annotations

import dis
from typing import Optional

import numpy as np

from ...ir.trace import Instruction, Region
from ...source import frame_loc, user_frame
from ..core import dtypes as dt, fastpath
from ..core.context import region
from ..core.fastpath import drain, gemm_acc, gemm_ready, gemm_submit, product_buffers
from ..core.storage import LazyStorage, Storage
from ..core.tensor import NkiTensor

_SHADOWED = (dt.bfloat16, dt.float16)  # read through the storage's cached fp32 copy (f32_view)
_F32 = dt.float32
_U8 = np.dtype(np.uint8)
_tuple_new = tuple.__new__
# the product's trace attrs as the accumulation rewrites them, per plan attrs tuple
_ACC_ATTRS: dict = {}
_ACC_ATTRS_MAX = 256


_NO_DATA = np.empty(0, np.uint8)  # a pending product's bytes before (and after) its accumulation
_IADD = ("INPLACE_ADD", "+=")  # the opname (<= 3.10) or BINARY_OP's argrepr (3.11+)
# code object -> {None: offsets at which a call's result goes straight to +=, offset: site}
_IADD_SITES: dict = {}
_IADD_SITES_MAX = 4096


class PendingStorage(LazyStorage):
    """A product tile's storage whose values are computed on first read of ``data``: the
    statement ``psum += nc_matmul(...)`` adds the product straight into PSUM instead
    (``accumulate``), and any other use computes the product as the eager path would."""
    __slots__ = ()

    def compute(self, operands) -> np.ndarray:
        """The product ``a.T @ b`` as bytes."""
        a, b = operands
        return (a.T @ b).reshape(-1).view(_U8)


def _iadd_sites(code) -> frozenset:
    """The f_lasti values at which ``code`` is inside a call whose result the next instruction
    adds in place (``x += f(...)``): the call's own offset up to the next instruction's."""
    ins = list(dis.get_instructions(code))
    out = set()
    for cur, nxt in zip(ins, ins[1:]):
        if cur.opname.startswith("CALL") and (nxt.opname in _IADD or
                                              (nxt.opname == "BINARY_OP" and nxt.argrepr in _IADD)):
            out.update(range(cur.offset, nxt.offset))
    return frozenset(out)


def cached_site(depth: int, table: dict, sites_of):
    """((source location, what ``sites_of`` says of the call: membership of a set, or a dict's
    entry), the frame) for the innermost user frame above ``depth``: one lookup per (code
    object, instruction offset), so neither the bytecode scan nor the line number (a walk over
    the line table) is repeated per call."""
    f = user_frame(depth + 1)
    if f is None:
        return (frame_loc(None), None), None
    code = f.f_code
    per = table.get(code)
    if per is None:
        if len(table) > _IADD_SITES_MAX:  # one entry per kernel function: bounded
            table.clear()
        per = table[code] = {None: sites_of(code)}
    lasti = f.f_lasti
    got = per.get(lasti)
    if got is None:
        sites = per[None]
        got = per[lasti] = (frame_loc(f), sites.get(lasti) if type(sites) is dict else
                            lasti in sites)
    return got, f


def _user_site():
    """(source location, feeds ``+=``) of the innermost user frame: True when it calls into
    trnsim from ``x += <call>(...)``, so nothing runs between the product's return and
    ``x.__iadd__``."""
    return cached_site(2, _IADD_SITES, _iadd_sites)[0]


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
    shadowed = s._st.sdtype in _SHADOWED and mv._st.sdtype in _SHADOWED
    a = vs if vs.ndim == 2 and vs.shape[1] == M else vs.reshape(-1, M)
    b = vm if vm.ndim == 2 and vm.shape[1] == N else vm.reshape(-1, N)
    nb = N * 4
    loc, feeds = _user_site()
    if feeds and shadowed and out_shape == (M, N) and gemm_ready():
        # ``x += nc_matmul(...)``: the product is left pending for accumulate() to add into
        # PSUM in one BLAS call.  The operands are fp32 copies of 16-bit tiles (f32_view), never
        # written in place (a write drops the copy), so they keep this instruction's values.
        vals = None
        st = PendingStorage.fresh("psum", f"t{next(ctx.name_counter)}", M * nb, _F32, M, nb,
                                  None, _NO_DATA)
        st.operands = (a, b)
        strides = (nb, 4)
    else:
        spare = product_buffers.take((M, N))
        vals = a.T @ b if spare is None else np.matmul(a.T, b, out=spare)
        if vals.shape != out_shape:
            vals = vals.reshape(out_shape)
        if vals.base is not None:  # a reshaped view: copied once, as base._adopt does
            vals = vals.copy(order="C")
        # base._adopt, inlined: the product array becomes the fresh tile's storage
        st = Storage.fresh("psum", f"t{next(ctx.name_counter)}", vals.nbytes, _F32, M, nb, None,
                           vals.reshape(-1).view(_U8))
        strides = vals.strides
    st.loc = loc
    rs = s._region or region(s)
    rm = mv._region or region(mv)
    out = NkiTensor(st, 0, out_shape, strides, od, 0)
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
    pst = prod._st
    pending = pst.operands if type(pst) is PendingStorage else None
    if prod._mask is not None or (vals is None and pending is None) or dst._dtype is not _F32 or \
            not dst_st.full or \
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
    if pending is not None and ((fastpath.ASYNC and gemm_submit(old, *pending)) or
                                gemm_acc(old, *pending)):
        # the product added into PSUM by the BLAS call that computed it (beta = 1): the same
        # bits as product-then-add (fastpath.gemm_acc), queued for the worker thread where it
        # can be (every other read of PSUM drains first); the dead product tile keeps no data
        pst.data = _NO_DATA
        f = prod._fresh
        idx = f[1]
        prod._fresh = None
    else:
        if fastpath.QUEUED:
            drain()  # this path reads and writes ``old`` itself
        if vals is None:
            vals = prod.array()  # computes the pending product, as the eager path would have
        if vals.shape != old.shape:
            if vals.size != old.size:
                return False
            vals = vals.reshape(old.shape)
        f = prod._fresh
        idx = f[1]
        prod._fresh = None
        np.add(old, vals, out=old)  # fp32 PSUM read-add-write, in place
        recycle(prod, prod._arr)
    dst_st._f32 = None
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
