"""The fused hot statement ``psum += nisa.nc_matmul(a_view, b_view)`` (ops/hot_matmul.py): it is
taken where it applies, declines the rest, gives the bits and trace of the general path
(TRNSIM_FASTPATH=0), and its accumulator is numpy's fp32 products summed one instruction at a time
in program order; plus a race between outer-loop iterations found after the inner loop's check."""
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.errors import RaceWarning  # noqa: E402
from trnsim.nki.core import fastpath  # noqa: E402
from trnsim.nki.ops import hot_matmul  # noqa: E402
from trnsim.options import Options  # noqa: E402
from trace_compare import bits as _bits  # noqa: E402
from trace_compare import normalized as _normalized  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
E4M3 = np.dtype(ml_dtypes.float8_e4m3)




class _Count:
    """How often hot_matmul.product / accumulate returned, and how often they took their case,
    seen through a profile hook (a wrapper would add a frame, and frames name source lines)."""

    def __init__(self):
        self.product = [0, 0]
        self.accumulate = [0, 0]
        self._codes = {hot_matmul.product.__code__: self.product,
                       hot_matmul.accumulate.__code__: self.accumulate}

    def _hook(self, frame, event, arg):
        if event == "return":
            c = self._codes.get(frame.f_code)
            if c is not None:
                c[0] += 1
                c[1] += arg is not None and arg is not False

    def __enter__(self):
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        return False


def _kernel(M, K, N, KT):
    """KT products into a zeroed accumulator, then a read of it, then KT more products."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        mid = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.ndarray((KT, nl.par_dim(K), 2 * M), dtype=a.dtype, buffer=nl.sbuf)
        sb = nl.ndarray((KT, nl.par_dim(K), N), dtype=b.dtype, buffer=nl.sbuf)
        for t in nl.affine_range(KT):
            sa[t] = nl.load(a[t])
            sb[t] = nl.load(b[t])
        acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(KT):
            acc += nisa.nc_matmul(sa[t, :, M:2 * M], sb[t])  # a view at an offset
        nl.store(mid, value=nl.copy(acc))
        for t in nl.affine_range(KT):
            acc += nisa.nc_matmul(sa[t, :, 0:M], sb[t])
        nl.store(out, value=nl.copy(acc))
        return out, mid
    return k


def _fp32_sums(a, b, M):
    """numpy: each product in fp32 (one matmul per instruction), added to the fp32 accumulator
    one at a time, in the kernel's order."""
    f = np.float32
    acc = np.zeros((M, b.shape[2]), f)
    for t in range(a.shape[0]):
        acc = acc + a[t][:, M:].astype(f).T @ b[t].astype(f)
    mid = acc.copy()
    for t in range(a.shape[0]):
        acc = acc + a[t][:, :M].astype(f).T @ b[t].astype(f)
    return acc, mid


@pytest.mark.parametrize("dt_in,M,K,N,KT", [(BF16, 128, 128, 512, 3), (F16, 64, 96, 200, 2),
                                            (F32, 32, 128, 128, 2)])
def test_hot_statement_is_taken_and_sums_products_in_program_order(dt_in, M, K, N, KT):
    rng = np.random.default_rng(M + K + N)
    a = (rng.standard_normal((KT, K, 2 * M), dtype=np.float32) / 4).astype(dt_in)
    b = (rng.standard_normal((KT, K, N), dtype=np.float32) / 4).astype(dt_in)
    was = fastpath.set_enabled(True)
    try:
        with _Count() as count:
            fast = _kernel(M, K, N, KT).run(a, b, options=Options(target="trn1"))
        taken = (list(count.product), list(count.accumulate))
        fastpath.set_enabled(False)
        ref = _kernel(M, K, N, KT).run(a, b, options=Options(target="trn1"))
    finally:
        fastpath.set_enabled(was)
    # with the fast paths on, every product but the first (whose shape is checked then, by the
    # general path) and every accumulation took the fused path
    assert taken == ([2 * KT, 2 * KT - 1], [2 * KT, 2 * KT])
    want, want_mid = _fp32_sums(a, b, M)
    out, mid = fast.outputs
    np.testing.assert_array_equal(_bits(mid), _bits(want_mid))
    np.testing.assert_array_equal(_bits(out), _bits(want))
    for got, r in zip(fast.outputs, ref.outputs):
        np.testing.assert_array_equal(_bits(got), _bits(r))
    assert _normalized(fast.traces[0]) == _normalized(ref.traces[0])
    mm = [i for i in fast.traces[0] if i.opcode == "nc_matmul"]
    assert len(mm) == 2 * KT
    # each product reads both operands and the accumulator and writes the accumulator
    for i in mm:
        assert dict(i.attrs)["accumulate"] is True
        assert i.writes[0] == i.reads[2] and i.writes[0].memory == "psum"


def test_cases_the_fused_path_declines_still_match_the_reference():
    """fp8 operands, a product kept by name, a PSUM tile never zeroed (the first product
    starts the group) and a transposed matmul go the general way, with the same results."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        sa = nl.load(a)
        sb = nl.load(b)
        acc = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)  # not zeroed
        acc += nisa.nc_matmul(sa, sb)
        named = nisa.nc_matmul(sa, sb)
        acc += named
        nl.store(out, value=nl.copy(acc))
        return out

    rng = np.random.default_rng(5)
    for d in (E4M3, BF16):
        a = (rng.standard_normal((128, 64), dtype=np.float32) / 4).astype(d)
        b = (rng.standard_normal((128, 128), dtype=np.float32) / 4).astype(d)
        was = fastpath.set_enabled(True)
        try:
            with _Count() as count:
                fast = k.run(a, b, options=Options(target="trn1"))
            fastpath.set_enabled(False)
            ref = k.run(a, b, options=Options(target="trn1"))
        finally:
            fastpath.set_enabled(was)
        np.testing.assert_array_equal(_bits(fast.outputs), _bits(ref.outputs))
        assert _normalized(fast.traces[0]) == _normalized(ref.traces[0])
        p = a.astype(F32).T @ b.astype(F32)
        np.testing.assert_array_equal(_bits(fast.outputs), _bits(p + p))
        # the first accumulation meets a never-written PSUM tile, the second a named product
        assert count.accumulate[1] == 0
        if d == E4M3:
            assert count.product[1] == 0  # fp8 operands are converted per read, not shadowed


def test_nested_loops_report_an_outer_race_after_the_inner_loop_cached_the_accesses():
    """The inner affine loop is checked first; the race is between iterations of the outer loop
    only, on a tile allocated before both loops."""
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        shared = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            part = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
            for j in nl.affine_range(2):
                part[j] = nl.load(x)
            shared[...] = nl.add(part[0], part[1])  # every i writes all of it: a race
        nl.store(out, value=shared)
        return out

    x = np.ones((128, 64), np.float32)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = k.run(x, options=Options(target="trn1"))
    found = [w.message for w in rec if issubclass(w.category, RaceWarning)]
    assert len(found) == 1
    msg = str(found[0])
    assert "affine_range iterations" in msg and "iteration 0" in msg and "iteration 1" in msg
    np.testing.assert_array_equal(np.asarray(res.outputs), 2 * x)
