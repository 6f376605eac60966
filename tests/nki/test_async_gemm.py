"""The queued PSUM accumulation (fastpath.gemm_submit: ``psum += nc_matmul(...)`` run by a worker
thread) gives the synchronous reference's bits: numpy's ``np.add(c, np.matmul(a.T, b))`` task by
task, including NaN payloads (the worker halts at a NaN already in PSUM and numpy finishes); a
full ring waits; a forked child and the two LNC cores see every value; an exception mid-kernel
leaves nothing queued; and every way a kernel can read PSUM after a ``+=`` chain drains first."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import trnsim.compat

trnsim.compat.install()
import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from trnsim.nki import harness  # noqa: E402
from trnsim.nki.core import fastpath  # noqa: E402
from trnsim.nki.ops import hot_matmul  # noqa: E402
from trnsim.options import Options  # noqa: E402
from trace_compare import normalized as _normalized  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

needs_queue = pytest.mark.skipif(not fastpath.gemm_ready(),
                                 reason="C fast path or numpy's sgemm not available")


def _u32(x):
    return np.asarray(x).view(np.uint32)


@pytest.fixture
def queued():
    """The queued path on (whatever the environment says), restored afterwards."""
    was_on, was_async = fastpath.set_enabled(True), fastpath.set_async(True)
    yield
    fastpath.drain()
    fastpath.set_async(was_async)
    fastpath.set_enabled(was_on)


def _operands(rng, K, M, N, n):
    a = [rng.standard_normal((K, M), dtype=np.float32) for _ in range(n)]
    b = [rng.standard_normal((K, N), dtype=np.float32) for _ in range(n)]
    return a, b


def _numpy_chain(c, a, b):
    for x, y in zip(a, b):
        np.add(c, np.matmul(x.T, y), out=c)


@needs_queue
def test_queued_chains_give_numpy_bits_and_drain_clears_the_flag(queued):
    rng = np.random.default_rng(1)
    a, b = _operands(rng, 128, 128, 512, 6)
    c1 = rng.standard_normal((128, 512), dtype=np.float32)
    c2 = rng.standard_normal((128, 512), dtype=np.float32)
    w1, w2 = c1.copy(), c2.copy()
    for i in range(6):  # two accumulators, interleaved: FIFO order per accumulator
        assert fastpath.gemm_submit(c1, a[i], b[i])
        assert fastpath.gemm_submit(c2, a[5 - i], b[i])
    assert fastpath.QUEUED
    fastpath.drain()
    assert not fastpath.QUEUED
    _numpy_chain(w1, a, b)
    _numpy_chain(w2, a[::-1], b)
    np.testing.assert_array_equal(_u32(c1), _u32(w1))
    np.testing.assert_array_equal(_u32(c2), _u32(w2))


@needs_queue
def test_cases_gemm_acc_declines_are_not_queued(queued):
    a = np.ones((4, 1), np.float32)  # M == 1: numpy takes gemv, not sgemm
    b = np.ones((4, 8), np.float32)
    c = np.zeros((1, 8), np.float32)
    assert not fastpath.gemm_submit(c, a, b) and not fastpath.QUEUED
    sq = np.ones((4, 4), np.float32)
    assert not fastpath.gemm_submit(np.zeros((4, 4), np.float32), sq, sq)  # a is b: syrk
    big = np.zeros((8, 8), np.float32)
    assert not fastpath.gemm_submit(big[:4, :4], big[:4, 4:], b[:, :4])  # c overlaps a
    was = fastpath.set_async(False)
    try:
        assert not fastpath.gemm_submit(np.zeros((4, 8), np.float32), sq, b)
    finally:
        fastpath.set_async(was)


@needs_queue
def test_a_nan_in_psum_halts_the_worker_and_numpy_finishes_with_its_payloads(queued):
    """c holding a NaN: the worker stops there; that task and every later one run as numpy's
    ``np.add(c, product)`` (c's NaN payload first), the earlier ones stay done."""
    rng = np.random.default_rng(2)
    a, b = _operands(rng, 64, 96, 200, 4)
    b[3][5, 7] = np.array([0x7fa01234], np.uint32).view(np.float32)[0]  # a NaN in a product
    good = rng.standard_normal((96, 200), dtype=np.float32)
    bad = rng.standard_normal((96, 200), dtype=np.float32)
    bad.view(np.uint32)[3, 150] = 0xffc0beef  # a NaN payload numpy must keep
    bad.view(np.uint32)[90, 7] = 0x7fc00001
    want_good, want_bad = good.copy(), bad.copy()
    halts = fastpath.module().gemm_queue_stats()[2]
    order = [(good, 0), (bad, 1), (good, 2), (bad, 3), (good, 3)]
    for c, i in order:
        # once the worker has halted, submit drains and declines: the caller then runs numpy's
        # path itself, as hot_matmul does (when that happens depends on the thread timing)
        if not fastpath.gemm_submit(c, a[i], b[i]):
            _numpy_chain(c, [a[i]], [b[i]])
    fastpath.drain()
    for c, i in order:
        _numpy_chain(want_good if c is good else want_bad, [a[i]], [b[i]])
    np.testing.assert_array_equal(_u32(good), _u32(want_good))
    np.testing.assert_array_equal(_u32(bad), _u32(want_bad))
    assert bad.view(np.uint32)[3, 150] == 0xffc0beef
    assert fastpath.module().gemm_queue_stats()[2] > halts
    # the queue works again after a halt
    c = rng.standard_normal((96, 200), dtype=np.float32)
    w = c.copy()
    assert fastpath.gemm_submit(c, a[0], b[0])
    fastpath.drain()
    _numpy_chain(w, [a[0]], [b[0]])
    np.testing.assert_array_equal(_u32(c), _u32(w))


@needs_queue
def test_a_full_ring_waits_for_the_worker(queued):
    m = fastpath.module()
    was = m.gemm_queue_capacity(2)
    try:
        rng = np.random.default_rng(3)
        a, b = _operands(rng, 128, 128, 512, 40)
        c = np.zeros((128, 512), np.float32)
        w = c.copy()
        waits = m.gemm_queue_stats()[1]
        for x, y in zip(a, b):
            assert fastpath.gemm_submit(c, x, y)
        assert len(fastpath._tasks) <= 40
        fastpath.drain()
        _numpy_chain(w, a, b)
        np.testing.assert_array_equal(_u32(c), _u32(w))
        assert m.gemm_queue_stats()[1] > waits  # 40 products cannot all be done at once
        with pytest.raises(ValueError):
            m.gemm_queue_capacity(0)
    finally:
        m.gemm_queue_capacity(was)


@needs_queue
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_sees_drained_values_and_restarts_the_worker(queued):
    rng = np.random.default_rng(4)
    a, b = _operands(rng, 128, 128, 512, 8)
    c = np.zeros((128, 512), np.float32)
    w = c.copy()
    for x, y in zip(a[:4], b[:4]):
        assert fastpath.gemm_submit(c, x, y)
    _numpy_chain(w, a[:4], b[:4])
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: values complete at the fork, and a queue of its own
        code = 1
        try:
            ok = not fastpath.QUEUED and np.array_equal(_u32(c), _u32(w))
            for x, y in zip(a[4:], b[4:]):
                ok = ok and fastpath.gemm_submit(c, x, y)
            fastpath.drain()
            _numpy_chain(w, a[4:], b[4:])
            ok = ok and np.array_equal(_u32(c), _u32(w)) and \
                fastpath.module().gemm_queue_stats()[3] >= 1
            code = 0 if ok else 1
        finally:
            os.write(wfd, bytes([code]))
            os._exit(code)
    os.close(wfd)
    got = os.read(r, 1)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert got == b"\x00" and os.WEXITSTATUS(status) == 0
    np.testing.assert_array_equal(_u32(c), _u32(w))  # the parent drained before the fork


# -- whole kernels ----------------------------------------------------------------------------

class _Count:
    """Counts queued accumulations (gemm_submit calls that returned True)."""

    def __enter__(self):
        self.n = 0
        self._orig = hot_matmul.gemm_submit

        def counted(c, a, b):
            ok = self._orig(c, a, b)
            self.n += ok
            return ok
        hot_matmul.gemm_submit = counted
        return self

    def __exit__(self, *exc):
        hot_matmul.gemm_submit = self._orig
        return False


def _queued_and_reference(run):
    """``run()`` with the queued path, then with TRNSIM_FASTPATH=0's reference path."""
    was_on, was_async = fastpath.set_enabled(True), fastpath.set_async(True)
    try:
        with _Count() as n:
            fast = run()
        fastpath.set_enabled(False)
        ref = run()
    finally:
        fastpath.set_async(was_async)
        fastpath.set_enabled(was_on)
    assert not fastpath.QUEUED
    return fast, ref, n.n


def _same(fast, ref):
    fo = fast.outputs if isinstance(fast.outputs, tuple) else (fast.outputs,)
    ro = ref.outputs if isinstance(ref.outputs, tuple) else (ref.outputs,)
    assert len(fo) == len(ro)
    for x, y in zip(fo, ro):
        x, y = np.asarray(x), np.asarray(y)
        u = np.dtype(f"u{x.dtype.itemsize}")
        np.testing.assert_array_equal(x.view(u), y.view(u))
    for tf, tr in zip(fast.traces, ref.traces):
        assert _normalized(tf) == _normalized(tr)


KT = 4


@nki.jit
def _reads_psum_every_way(a, b):
    """A ``+=`` chain, then each way a kernel reads (or overwrites) that PSUM tile at once."""
    outs = [nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(9)]
    sa = nl.ndarray((KT, nl.par_dim(128), 128), dtype=a.dtype, buffer=nl.sbuf)
    sb = nl.ndarray((KT, nl.par_dim(128), 256), dtype=b.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(KT):
        sa[t] = nl.load(a[t])
        sb[t] = nl.load(b[t])

    def chain(n=KT):
        acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
        for t in nl.affine_range(n):
            acc += nisa.nc_matmul(sa[t], sb[t])
        return acc

    nl.store(outs[0], value=nl.copy(chain()))                       # nl.copy
    nl.store(outs[1], value=nl.add(chain(), 1.0))                   # tensor_scalar
    nl.store(outs[2], value=nisa.tensor_copy(chain()))              # nisa.tensor_copy
    s = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    s[...] = chain()                                                # assignment copy
    nl.store(outs[3], value=s)
    acc = chain()
    nl.store(outs[4], value=nl.multiply(acc[:, 0:256], acc))       # a view and the tile
    nl.store(outs[5], value=nisa.activation(op=nl.exp, data=chain(2)))  # activation
    red = nl.sum(chain(), axis=1, keepdims=True)                    # a reduction
    nl.store(outs[6], value=nl.add(nl.zeros((128, 256), nl.float32), red))
    acc = chain()
    acc += nisa.nc_matmul(sa[0], sb[1] if KT > 1 else sb[0])       # a general-path product
    nl.store(outs[7], value=nl.copy(acc))
    acc = chain()
    acc[...] = 0.0                                                  # overwritten, then re-summed
    acc += nisa.nc_matmul(sa[1], sb[2])
    nl.store(outs[8], value=nl.copy(acc))
    return tuple(outs)


@needs_queue
def test_every_read_of_psum_after_a_chain_sees_the_reference_bits():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((KT, 128, 128), dtype=np.float32) / 8).astype(BF16)
    b = (rng.standard_normal((KT, 128, 256), dtype=np.float32) / 8).astype(BF16)
    fast, ref, queued_n = _queued_and_reference(
        lambda: _reads_psum_every_way.run(a, b, options=Options(target="trn1")))
    _same(fast, ref)
    assert queued_n > 20  # the chains really went through the queue
    f = np.float32
    want = np.zeros((128, 256), f)
    for t in range(KT):
        want = want + a[t].astype(f).T @ b[t].astype(f)
    np.testing.assert_array_equal(_u32(fast.outputs[0]), _u32(want))


@nki.jit
def _fails_mid_chain(a, b):
    sa = nl.load(a)
    sb = nl.load(b)
    acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
    for _ in nl.affine_range(3):
        acc += nisa.nc_matmul(sa, sb)
    raise RuntimeError("the kernel's own failure")


@needs_queue
def test_an_exception_mid_kernel_leaves_nothing_queued(queued):
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((128, 128), dtype=np.float32) / 8).astype(BF16)
    b = (rng.standard_normal((128, 256), dtype=np.float32) / 8).astype(BF16)
    with _Count() as n:
        with pytest.raises(RuntimeError, match="own failure"):
            _fails_mid_chain.run(a, b, options=Options(target="trn1"))
    assert n.n >= 1 and not fastpath.QUEUED and not fastpath._tasks


def _lnc_body(a, b):
    """Each core sums its own K-tile chain into its own PSUM tile, then stores its half."""
    out = nl.ndarray((2, 128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    c = nl.program_id(0)
    sa = nl.ndarray((KT, nl.par_dim(128), 128), dtype=a.dtype, buffer=nl.sbuf)
    sb = nl.ndarray((KT, nl.par_dim(128), 256), dtype=b.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(KT):
        sa[t] = nl.load(a[c, t])
        sb[t] = nl.load(b[c, t])
    acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
    for r in nl.sequential_range(3):
        for t in nl.affine_range(KT):
            acc += nisa.nc_matmul(sa[t], sb[t])
    nl.store(out[c], value=nl.copy(acc))
    return out


@needs_queue
def test_two_lnc_cores_share_the_queue_and_see_their_own_sums():
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((2, KT, 128, 128), dtype=np.float32) / 8).astype(BF16)
    b = (rng.standard_normal((2, KT, 128, 256), dtype=np.float32) / 8).astype(BF16)

    def run():
        return harness.launch(_lnc_body, (a, b), {}, api="legacy", lnc=2,
                              options=Options(target="trn2"))
    fast, ref, queued_n = _queued_and_reference(run)
    _same(fast, ref)
    assert queued_n > 0
    f = np.float32
    for c in range(2):
        want = np.zeros((128, 256), f)
        for _ in range(3):
            for t in range(KT):
                want = want + a[c, t].astype(f).T @ b[c, t].astype(f)
        np.testing.assert_array_equal(_u32(fast.outputs[c]), _u32(want))


# -- the numeric kernel test files with the queue forced on, against TRNSIM_FASTPATH=0 ---------

def test_the_fast_path_kernel_tests_pass_with_the_queue_forced_on_and_off():
    """Those files compare the fast path (queued here) with the reference path bit for bit."""
    files = [os.path.join(HERE, f) for f in ("test_fastpath_kernels.py", "test_fastpath_gemm.py",
                                             "test_fastpath_hot_matmul.py")]
    for flag in ("1", "0"):
        env = dict(os.environ, TRNSIM_ASYNC_GEMM=flag)
        env.pop("TRNSIM_FASTPATH", None)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            *files], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, (flag, r.stdout[-3000:], r.stderr[-3000:])


def _flags(env: dict) -> list:
    code = ("from trnsim.nki.core import fastpath as f; r = f.gemm_ready(); "
            "print(f.ON, f.ASYNC, r)")
    e = {k: v for k, v in os.environ.items() if k not in ("TRNSIM_ASYNC_GEMM", "TRNSIM_FASTPATH",
                                                           "OPENBLAS_NUM_THREADS")}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True,
                       text=True, timeout=120)
    return r.stdout.split()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@needs_queue
def test_the_environment_switches():
    """=0 off, =1 on; unset: on only with a core to spare beside numpy's BLAS threads (set here
    through OpenBLAS's own OPENBLAS_NUM_THREADS)."""
    assert _flags({"TRNSIM_ASYNC_GEMM": "0"}) == ["True", "False", "True"]
    assert _flags({"TRNSIM_ASYNC_GEMM": "1", "OPENBLAS_NUM_THREADS": str(_cpus())}) == \
        ["True", "True", "True"]
    assert _flags({"TRNSIM_FASTPATH": "0"}) == ["False", "True", "False"]  # nothing to queue
    assert _flags({"OPENBLAS_NUM_THREADS": str(_cpus())}) == ["True", "False", "True"]
    if _cpus() > 1:
        assert _flags({"OPENBLAS_NUM_THREADS": "1"}) == ["True", "True", "True"]
