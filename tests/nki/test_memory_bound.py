"""Memory stays bounded when kernels run again and again (issue 14, section 2): a finished run keeps
only what ``last_run()`` returns (one RunResult, its trace), no tensors, storages, contexts or the
physical SBUF/PSUM buffers of manually placed tensors; traced Python memory does not grow per run."""
import gc
import tracemalloc

import numpy as np

from trnsim.nki.harness import Kernel, last_run
from trnsim.options import Options


def _auto(a, b):
    import neuronxcc.nki.language as nl
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, nl.add(nl.multiply(x, y), x))
    return out


def _manual(a):
    import neuronxcc.nki.compiler as ncc
    import neuronxcc.nki.language as nl
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(a)
    nl.store(out, nl.exp(t))
    return out


def _live(names):
    counts = dict.fromkeys(names, 0)
    for o in gc.get_objects():
        n = type(o).__name__
        if n in counts:
            counts[n] += 1
    return counts


NAMES = ("Trace", "RunResult", "KernelContext", "Storage", "NkiTensor", "ManualMemory")


def _loop(fn, args, n):
    k = Kernel(fn, api="legacy")
    for _ in range(n):
        out = k.run(*args, options=Options(target="trn2")).outputs
    return out


def test_repeated_runs_keep_only_the_last_result():
    import trnsim.compat
    trnsim.compat.install()
    a = np.random.default_rng(0).normal(size=(128, 512)).astype(np.float32)
    b = np.random.default_rng(1).normal(size=(128, 512)).astype(np.float32)
    out = _loop(_auto, (a, b), 3)
    np.testing.assert_allclose(out, a * b + a, rtol=1e-6)          # numpy reference
    gc.collect()
    before = _live(NAMES)
    out2 = _loop(_manual, (a,), 12)
    np.testing.assert_allclose(out2, np.exp(a), rtol=1e-5)
    del out, out2
    gc.collect()
    after = _live(NAMES)
    # one finished run is kept (last_run(), which replaced the one counted in ``before``); nothing
    # of the kernels' runtime state survives (other tests' fixtures may hold traces of their own)
    for n in NAMES:
        assert after[n] <= before[n], (n, before, after)
    assert last_run() is not None and len(last_run().traces) == 1


def test_traced_memory_does_not_grow_per_run():
    import trnsim.compat
    trnsim.compat.install()
    a = np.random.default_rng(2).normal(size=(128, 2048)).astype(np.float32)
    _loop(_manual, (a,), 3)                      # warm caches (views, regions, cost memos)
    gc.collect()
    tracemalloc.start()
    try:
        _loop(_manual, (a,), 3)
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        _loop(_manual, (a,), 20)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # 20 more runs of a kernel whose input alone is 1 MiB and whose manual SBUF buffer is 24 MiB:
    # less than 256 KiB more held afterwards (a leak of one input per run would be 20 MiB)
    assert grown < 256 * 1024, grown


def test_suite_memory_bench_tells_the_tests_own_memory_from_trnsims(tmp_path):
    """bench/suite_memory.py splits a test's peak RSS into what the test itself allocates (here a
    256 MiB golden, written so its pages are resident) and what a trnsim launch adds (here a
    128 x 512 fp32 kernel: well under 64 MiB)."""
    import os
    import sys
    unit = tmp_path / "test" / "unit"
    unit.mkdir(parents=True)
    (tmp_path / "src").mkdir()
    (unit / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--simulation-only', action='store_true')\n")
    (unit / "test_heavy_golden.py").write_text(
        "import numpy as np\n"
        "from neuronxcc.nki import baremetal, simulate_kernel\n"
        "import neuronxcc.nki.language as nl\n\n"
        "def k(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, nl.exp(nl.load(a)))\n"
        "    return out\n\n"
        "def test_golden_then_kernel():\n"
        "    golden = np.full((256, 1024, 1024), 2, np.uint8)\n"
        "    del golden\n"
        "    a = np.ones((128, 512), np.float32)\n"
        "    assert np.allclose(simulate_kernel(baremetal(k), a), np.exp(a))\n")
    bench = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
    sys.path.insert(0, bench)
    try:
        import suite_memory
    finally:
        sys.path.remove(bench)
    res = suite_memory.measure(str(tmp_path), per="test")
    (rec,) = res["records"]
    mib = 1 << 20
    assert rec["outcome"] == "passed" and rec["launches"] == 1
    # 256 MiB golden; RSS counts pages, and the start reading may hold pages freed later, so a
    # few MiB of slack
    assert rec["own_peak"] - rec["rss_start"] >= 250 * mib
    assert 0 <= rec["trnsim_extra"] < 64 * mib
    assert rec["launch_peak"] < rec["own_peak"]  # the golden was freed before the launch
    assert rec["process_maxrss"] >= rec["own_peak"]  # the process peak survives the resets
