"""The C dependency analysis and scheduler (_native.c) against the pure-Python reference
(deps.dependencies_py, scheduler.schedule_py): random traces built to hit every rule, the matmul
ladder and a few kernels.  Skipped where the extension is not built."""
import dataclasses
import os
import sys

import ml_dtypes
import numpy as np
import pytest

from trnsim.des import GapResource
from trnsim.hardware import get_chip, get_core
from trnsim.ir.engines import ENGINE_CODE
from trnsim.ir.trace import Instruction, Region, Trace
from trnsim.options import Options
from trnsim.source import SourceLoc
from trnsim.timing import CostModel, dependencies, encode, native, schedule
from trnsim.timing.deps import dependencies_py
from trnsim.timing.scheduler import GAP_WINDOW, schedule_py
from trnsim.timing.timeline import DepGraph

needs_native = pytest.mark.skipif(not native.available(),
                                  reason="trnsim.timing._native is not built (or TRNSIM_NATIVE=0)")
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
LOC = SourceLoc("random.py", 1, "k")
TARGETS = ("trn1", "trn2", "trn3")
WIDTH = {"float32": 4, "bfloat16": 2, "float8_e4m3": 1}


def model(target, order=None, window=None):
    """The target's cost model; ``order`` / ``window`` override its stream reordering."""
    core = get_core(target)
    if window is not None:
        t = core.timing
        core = dataclasses.replace(core, timing=dataclasses.replace(
            t, reorder=dataclasses.replace(t.reorder, window_instructions=window)))
    return CostModel(core, get_chip(target), stream_order=order)


# -- random traces -------------------------------------------------------------------------------
class _Gen:
    """Instructions over a few tensors whose regions overlap, nest, repeat and straddle buckets."""

    def __init__(self, rng):
        self.rng = rng
        self.pool = []  # regions seen, reused so reads repeat (same-engine collapse, covers)

    def region(self, memory):
        rng = self.rng
        if self.pool and rng.random() < 0.35:
            r = self.pool[rng.integers(len(self.pool))]
            if r.memory == memory:
                # an equal region, sometimes a distinct but equal object
                return r if rng.random() < 0.5 else Region(*r)
        dtype = str(rng.choice(list(WIDTH)))
        w = WIDTH[dtype]
        if memory == "hbm":
            tensor = int(rng.integers(100, 104))
            # rows x bytes within a row (a tensor without a pitch is one row)
            p0 = int(rng.choice([0, 0, 0, 3, 64]))
            parts = int(rng.choice([1, 1, 16, 128]))
            start = int(rng.choice([0, 4096, 65536, 65536 * 3 - 512, 300000]))
            length = int(rng.choice([0, w, 2048, 65536, 140000, 8 * 65536]))
        else:
            tensor = int(rng.integers(1, 5)) if memory == "sbuf" else int(rng.integers(-4, -1))
            p0 = int(rng.choice([0, 0, 0, 32, 64, 96]))
            parts = int(rng.choice([1, 16, 32, 64, 128]))
            parts = min(parts, 128 - p0)
            start = int(rng.choice([0, 0, 512, 2048, 2044, 4096, 6000]))
            length = int(rng.choice([0, w, 256, 512, 2048, 2052, 4096, 8192]))
        elements = (length // w) * parts
        contiguous = int(rng.choice([w, max(w, length), max(w, length // 4), 64]))
        r = Region(memory, tensor, f"t{tensor}", p0, parts, start, start + length, elements, dtype,
                   contiguous, bool(rng.random() < 0.05))
        self.pool.append(r)
        return r

    def instruction(self, i):
        rng = self.rng
        eng = str(rng.choice(["tensor", "vector", "scalar", "gpsimd", "sync", "dma"],
                             p=[0.25, 0.15, 0.12, 0.08, 0.05, 0.35]))
        attrs = []
        parts = int(rng.choice([1, 7, 16, 33, 64, 100, 128]))
        free = int(rng.choice([1, 64, 128, 512, 2048]))
        din = dout = str(rng.choice(list(WIDTH)))
        if eng == "dma":
            op = "dma_transpose" if rng.random() < 0.05 else "dma_copy"
            src = self.region(str(rng.choice(["hbm", "sbuf", "psum"], p=[0.6, 0.35, 0.05])))
            dst = self.region("sbuf" if src.memory == "hbm" else str(rng.choice(["hbm", "sbuf"])))
            reads, writes = (src,), (dst,) if rng.random() < 0.95 else ()
            if rng.random() < 0.2:
                attrs.append(("dge", "hwdge"))
            if rng.random() < 0.05:
                attrs.append(("transpose", True))
        elif eng == "tensor":
            op = "nc_matmul_mx" if rng.random() < 0.05 else "nc_matmul"
            reads = [self.region("sbuf"), self.region("sbuf")]
            if rng.random() < 0.5:
                reads.append(self.region("psum"))
            reads = tuple(reads) if rng.random() < 0.97 else ()
            writes = (self.region("psum"),)
            attrs += [("moving_free", free), ("stationary_free", int(rng.choice([32, 128]))),
                      ("contraction", parts)]
            for k, v in (("transpose", True), ("onezero", True), ("perf_mode", "double_row"),
                         ("mx", True)):
                if rng.random() < 0.1:
                    attrs.append((k, v))
        else:
            op = str(rng.choice(["tensor_tensor", "tensor_copy", "activation", "tensor_scalar",
                                 "memset", "iota"]))
            nr = int(rng.integers(0, 3))
            reads = tuple(self.region(str(rng.choice(["sbuf", "psum"], p=[0.7, 0.3])))
                          for _ in range(nr))
            nw = 0 if eng == "sync" and rng.random() < 0.5 else int(rng.integers(1, 3))
            writes = tuple(self.region(str(rng.choice(["sbuf", "psum"], p=[0.8, 0.2])))
                           for _ in range(nw))
            if rng.random() < 0.2:
                attrs.append(("reduce_op", "add"))
        return Instruction(i, eng, op, reads, writes, parts, free, din, dout, tuple(attrs), LOC)


def random_trace(seed, n, target="trn2"):
    gen = _Gen(np.random.default_rng(seed))
    return Trace(target=target, instructions=[gen.instruction(i) for i in range(n)])


# -- comparison ----------------------------------------------------------------------------------
def assert_same(trace, target, m=None):
    m = model(target) if m is None else m
    ref_deps = dependencies_py(trace, m.reorder_engines)
    ref = schedule_py(trace, m, ref_deps)
    got = schedule(trace, m, backend="native")
    assert list(got.deps) == [tuple(sorted(d)) for d in ref_deps]
    for f in ("start", "end", "busy_end"):
        np.testing.assert_allclose(getattr(got, f), getattr(ref, f), rtol=1e-9, atol=0, err_msg=f)
    np.testing.assert_array_equal(got.engine_code, ref.engine_code)
    # each instruction runs on its traced engine, or one of the engines it was left to (issue 13)
    for e, ins in zip(got.engine, trace):
        assert e == ins.engine or e in (ins.attr("engine_auto") or ())
    for f in ("flops", "pe_bf16_equiv", "hbm_bytes", "dma_bytes", "throttled_ns"):
        assert getattr(got, f) == getattr(ref, f), f
    assert len(got.dma_parts) == len(ref.dma_parts)
    for a, b in zip(got.dma_parts, ref.dma_parts):
        assert a[:2] == b[:2] and a[2:] == pytest.approx(b[2:], rel=1e-9, abs=0)
    assert got.dma_parts.queue_busy_ns() == pytest.approx(ref.dma_parts.queue_busy_ns(), rel=1e-9)
    assert list(got.dma_parts.queue_busy_ns()) == list(ref.dma_parts.queue_busy_ns())
    assert got.dma_parts.active_ns() == pytest.approx(ref.dma_parts.active_ns(), rel=1e-9)
    return ref, got


@needs_native
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", range(4))
def test_random_traces_match_the_reference(target, seed):
    assert_same(random_trace(seed, 700, target), target)


@needs_native
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("order,window", [("in_order", None), ("window", 1), ("window", 2),
                                          ("window", 16), ("window", 10 ** 9)])
def test_random_traces_match_the_reference_in_every_stream_order(target, order, window):
    """Early issue (reorder.py) in C and Python: the same placements, hoisted loads included."""
    m = model(target, order, window)
    for seed in (5, 6):
        ref, got = assert_same(random_trace(seed, 700, target), target, m)
    if window and window > 1:  # some instruction was issued ahead of an earlier one on its engine
        moved = False
        for e in ("vector", "scalar", "gpsimd"):
            st = got.start[got.engine_code == ENGINE_CODE[e]]
            moved |= bool(np.any(np.diff(st) < 0))
        assert moved


@needs_native
def test_encoders_agree_and_costs_are_memoized():
    tr = random_trace(11, 3000)
    a, b = encode.encode(tr), encode.encode_py(tr)
    np.testing.assert_array_equal(a.shape, b.shape)
    np.testing.assert_array_equal(a.reg_mem, b.reg_mem)
    np.testing.assert_array_equal(a.reg_geo, b.reg_geo)
    assert a.engines == b.engines and a.memories == b.memories
    assert all(x is y for x, y in zip(a.reps, b.reps))
    # a trace of the same few shapes repeated: one representative per shape
    shapes = len(a.reps)
    rep = Trace("trn2", [ins._replace(index=i) for i, ins in enumerate(list(tr)[:50] * 40)])
    assert len(encode.encode(rep).reps) <= min(shapes, 50)


@needs_native
def test_long_dma_histories_exercise_the_gap_window(monkeypatch):
    """Mostly narrow DMAs (one to three queues) waiting on slow compute: gaps open and histories
    grow past GAP_WINDOW intervals, so the look-back limit and gap merging are compared too."""
    longest = [0]
    place = GapResource.place  # the DMA queues' gap-filling server (timing/rules.py, des/gaps.py)

    def spy(self, ready, dur):
        longest[0] = max(longest[0], len(self.starts))
        return place(self, ready, dur)

    monkeypatch.setattr(GapResource, "place", spy)
    rng = np.random.default_rng(5)
    ins = []
    for i in range(4000):
        if rng.random() < 0.3:
            t = int(rng.integers(1, 40))
            ins.append(Instruction(i, "scalar", "activation",
                                   (Region("sbuf", t, "a", 0, 128, 0, 4096, 128 * 1024, "float32",
                                           4096),),
                                   (Region("sbuf", t, "a", 0, 128, 0, 4096, 128 * 1024, "float32",
                                           4096),), 128, int(rng.choice([64, 4096])), "float32",
                                   "float32", (), LOC))
        else:
            t = int(rng.integers(1, 40))
            parts = int(rng.choice([1, 8, 9, 17, 20]))
            nbytes = int(rng.choice([0, 64, 512, 4096]))
            ins.append(Instruction(i, "dma", "dma_copy",
                                   (Region("sbuf", t, "a", 0, parts, 0, nbytes, parts * nbytes // 4,
                                           "float32", max(nbytes, 4)),),
                                   (Region("hbm", 1000 + i, "o", 0, 1, 0, parts * nbytes,
                                           parts * nbytes // 4, "float32", max(nbytes, 4)),),
                                   parts, nbytes // 4, "float32", "float32", (), LOC))
    for target in TARGETS:
        assert_same(Trace(target, ins), target)
    assert longest[0] > GAP_WINDOW


# -- kernels -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kernels():
    import trnsim.compat
    trnsim.compat.install()
    sys.path.insert(0, BENCH)
    try:
        import ladder_kernels
        import layernorm_kernels
        yield ladder_kernels, layernorm_kernels
    finally:
        sys.path.remove(BENCH)


@needs_native
@pytest.mark.parametrize("target", TARGETS)
def test_matmul_ladder_matches_the_reference(kernels, target):
    ladder, _ = kernels
    a = np.zeros((512, 256), dtype=ml_dtypes.bfloat16)
    b = np.zeros((512, 1024), dtype=ml_dtypes.bfloat16)
    opts = Options(target="trn1", timing_only=True)
    for name, kern, _ in ladder.TRN1_LADDER:
        kw = dict(BM=2, BN=2, BK=2) if name == "fully_optimized" else {}
        run = kern.run(a, b, options=opts, **kw)
        assert_same(run.traces[0], target)


@needs_native
def test_layernorm_and_example_kernels_match_the_reference(kernels):
    _, ln = kernels
    from trnsim.examples.matmul import matmul_tiled
    x = np.random.default_rng(0).standard_normal((300, 1000)).astype(np.float32)
    g = np.ones(1000, np.float32)
    for target in TARGETS:
        for kern in (ln.layernorm_v1, ln.layernorm_v2):
            assert_same(kern.run(x, 1e-5, g, g, options=Options(target=target)).traces[0], target)
        a = np.ones((256, 256), dtype=ml_dtypes.bfloat16)
        b = np.ones((256, 1024), dtype=ml_dtypes.bfloat16)
        assert_same(matmul_tiled.run(a, b, options=Options(target=target)).traces[0], target)


@needs_native
def test_new_api_ladder_with_fast_forwarded_loops_matches_the_reference(kernels):
    sys.path.insert(0, BENCH)
    try:
        from ladder_kernels_trn2 import TRN2_LADDER
    except ImportError as e:  # the new-API front end is work in progress
        pytest.skip(f"new nki API not importable: {e}")
    finally:
        sys.path.remove(BENCH)
    a = np.zeros((512, 256), dtype=np.float32)
    b = np.zeros((512, 1024), dtype=np.float32)
    opts = Options(target="trn2", timing_only=True, fast_forward="all")
    for name, kern, _ in TRN2_LADDER:
        kw = dict(BM=2, BN=2, BK=2) if name == "v5_blocked_k" else {}
        assert_same(kern.run(a, b, options=opts, **kw).traces[0], "trn2")


# -- API -----------------------------------------------------------------------------------------
@needs_native
def test_given_reference_deps_and_dependency_graph_give_the_same_timeline():
    tr = random_trace(3, 400)
    m = model("trn2")
    a = schedule(tr, m, dependencies_py(tr), backend="native")
    b = schedule(tr, m, dependencies(tr), backend="native")
    c = schedule(tr, m, backend="python")
    np.testing.assert_array_equal(a.end, b.end)
    np.testing.assert_array_equal(a.end, c.end)
    assert isinstance(dependencies(tr), DepGraph)
    assert dependencies(tr) == [tuple(sorted(d)) for d in dependencies_py(tr)]


@needs_native
def test_records_that_are_not_tuples_use_the_python_encoder():
    class Rec:
        def __init__(self, ins):
            for f in Instruction._fields:
                setattr(self, f, getattr(ins, f))
            self.attr = ins.attr

    tr = random_trace(4, 300)
    plain = Trace("trn2", [Rec(i) for i in tr])
    m = model("trn2")
    np.testing.assert_array_equal(schedule(plain, m, backend="native").end,
                                  schedule(tr, m, backend="python").end)


@needs_native
def test_unknown_engine_is_an_error_on_both_paths():
    tr = Trace("trn2", [Instruction(0, "warp", "nop", (), (), 1, 1, "float32", "float32", (), LOC)])
    for backend in ("native", "python"):
        with pytest.raises(KeyError):
            schedule(tr, model("trn2"), backend=backend)


def test_python_path_when_native_is_switched_off(monkeypatch):
    monkeypatch.setenv("TRNSIM_NATIVE", "0")
    assert not native.available()
    tr = random_trace(1, 200)
    tl = schedule(tr, model("trn1"))
    assert isinstance(tl.deps, list)           # the reference's list of tuples
    assert tl.latency_ns > 0 and len(tl.start) == len(tr)
    with pytest.raises(RuntimeError, match="not available"):
        schedule(tr, model("trn1"), backend="native")
    with pytest.raises(ValueError, match="unknown backend"):
        schedule(tr, model("trn1"), backend="cuda")


def test_empty_trace():
    for backend in ("python",) + (("native",) if native.available() else ()):
        tl = schedule(Trace("trn2"), model("trn2"), backend=backend)
        assert tl.latency_ns == 0.0 and len(tl.dma_parts) == 0 and tl.dma_parts.active_ns() == 0.0
