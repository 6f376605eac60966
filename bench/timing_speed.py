"""Speed of the timing model.

    python bench/timing_speed.py [--json] [--million] [--repeat N]

Prints:
  - wall time and peak memory to time a 2048^3 bf16 GEMM kernel end to end (kernel run timing-only,
    then the timing model; SCALE-Sim, for scale, needs about a minute and 1 GB for a 1024^3 GEMM
    on this machine);
  - the 4096^3 GEMM with every instruction executed (``fast_forward="off"``: the Python front end's
    own speed) and with loop fast-forward, end to end in simulated instructions per second;
  - the timing model replaying the recorded 4096^3 trace: the pure-Python reference
    (``replay_deps`` / ``replay_schedule``) and, when the C extension is built, the native path
    split into encoding, dependencies and scheduling;
  - with --million: a kernel of one million instructions timed end to end, with its peak Python
    memory, and native replay of a synthetic one-million-instruction trace (a software-pipelined
    tile loop, no loop blocks) with the memory its Timeline holds.
Timings are the best of --repeat runs; peak Python memory is measured in separate runs, since
tracemalloc slows Python several-fold.
"""
import argparse
import json
import os
import resource
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _gemm(n, target="trn2", fast_forward="auto"):
    import ml_dtypes
    import numpy as np
    from ladder_kernels import trn1_fully_optimized
    from trnsim.options import Options
    from trnsim.timing import estimate_run
    bm = max(1, min(16, n // 128))
    bk = max(1, min(8, n // 128))
    bn = max(1, min(2, n // 512))
    a = np.zeros((n, n), dtype=ml_dtypes.bfloat16)
    b = np.zeros((n, n), dtype=ml_dtypes.bfloat16)
    t0 = time.perf_counter()
    res = trn1_fully_optimized.run(a, b, BM=bm, BN=bn, BK=bk,
                                   options=Options(target=target, timing_only=True,
                                                   fast_forward=fast_forward))
    t1 = time.perf_counter()
    est = estimate_run(res)
    t2 = time.perf_counter()
    return res, est, t1 - t0, t2 - t1


def _best(fn, repeat):
    """(fastest wall time, that run's result) over ``repeat`` runs."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        got = fn()
        t = time.perf_counter() - t
        if t < best:
            best, out = t, got
    return best, out


def synthetic_trace(n, target="trn2"):
    """A software-pipelined tile loop of ``n`` instructions: DMA loads into rotating SBUF buffers,
    matmuls accumulating in PSUM banks, PSUM evacuation on Vector/Scalar, a GpSimd op, DMA stores.
    Every region is a fresh object, as a lazily materialized trace yields them."""
    from trnsim.ir.trace import Instruction, Region, Trace
    from trnsim.source import SourceLoc
    loc = SourceLoc("synthetic.py", 1, "pipeline")
    ins = []
    add = ins.append
    mm_attrs = (("moving_free", 512), ("stationary_free", 128), ("contraction", 128))
    k = 0
    while len(ins) < n:
        a_buf, b_buf, bank, o_buf = k % 4, k % 3, k % 8, k % 2
        parts = 128 if k % 5 else 32        # some narrow transfers use fewer DMA queues
        i = len(ins)
        a = Region("sbuf", 10 + a_buf, "a", 0, 128, 0, 256, 128 * 128, "bfloat16", 256)
        b = Region("sbuf", 20 + b_buf, "b", 0, 128, 0, 1024, 128 * 512, "bfloat16", 1024)
        add(Instruction(i, "dma", "dma_copy",
                        (Region("hbm", 1, "A", 0, 1, k * 32768, k * 32768 + 32768, 16384,
                                "bfloat16", 256),), (a,), 128, 128, "bfloat16", "bfloat16", (),
                        loc))
        add(Instruction(i + 1, "dma", "dma_copy",
                        (Region("hbm", 2, "B", 0, 1, k * 131072, k * 131072 + 131072, 65536,
                                "bfloat16", 1024),), (b,), 128, 512, "bfloat16", "bfloat16", (),
                        loc))
        p = Region("psum", 30 + bank, "acc", 0, 128, 0, 2048, 65536, "float32", 2048)
        for j in range(4):
            add(Instruction(i + 2 + j, "tensor", "nc_matmul",
                            (Region("sbuf", 10 + a_buf, "a", 0, 128, 64 * j, 64 * j + 64, 4096,
                                    "bfloat16", 64), b, p), (p,), 128, 512, "bfloat16",
                            "float32", mm_attrs + (("accumulate", j > 0),), loc))
        o = Region("sbuf", 40 + o_buf, "o", 0, 128, 0, 1024, 65536, "bfloat16", 1024)
        add(Instruction(i + 6, "vector" if k % 2 else "scalar", "tensor_copy", (p,), (o,), 128,
                        512, "float32", "bfloat16", (), loc))
        add(Instruction(i + 7, "gpsimd", "tensor_scalar", (o,), (o,), 128, 512, "bfloat16",
                        "bfloat16", (("op0", "multiply"),), loc))
        add(Instruction(i + 8, "dma", "dma_copy", (o,),
                        (Region("hbm", 3, "C", 0, 1, k * 131072, k * 131072 + 131072, 65536,
                                "bfloat16", 1024),), parts, 512, "bfloat16", "bfloat16", (), loc))
        add(Instruction(i + 9, "sync", "core_barrier", (), (), 1, 1, "-", "-", (), loc))
        k += 1
    return Trace(target=target, instructions=ins[:n])


def _replay(tr, model, repeat, python=True):
    """Replay speeds (instructions per second) of one trace, Python reference and native."""
    from trnsim.timing import native
    from trnsim.timing.deps import dependencies_py
    from trnsim.timing.scheduler import schedule_py
    n = len(tr)
    out = {}
    if python:
        t_deps, deps = _best(lambda: dependencies_py(tr), repeat)
        t_s, _ = _best(lambda: schedule_py(tr, model, deps), repeat)
        out.update(deps_instr_per_s=round(n / t_deps), schedule_instr_per_s=round(n / t_s),
                   total_instr_per_s=round(n / (t_deps + t_s)))
    if native.available():
        from trnsim.timing.encode import encode
        t_enc, enc = _best(lambda: encode(tr), repeat)
        t_deps, graph = _best(lambda: native.dependencies_encoded(enc), repeat)
        t_s, tl = _best(lambda: native.schedule_encoded(enc, model, graph), repeat)
        out.update(native_encode_instr_per_s=round(n / t_enc),
                   native_deps_instr_per_s=round(n / t_deps),
                   native_schedule_instr_per_s=round(n / t_s),
                   native_deps_schedule_instr_per_s=round(n / (t_deps + t_s)),
                   native_all_instr_per_s=round(n / (t_enc + t_deps + t_s)),
                   native_timeline_mb=round(tl.nbytes() / 2 ** 20, 1))
    return out


def _million(repeat):
    """A kernel of one million instructions, timed end to end (kernel run timing-only, then the
    timing model), and its peak Python memory: 1001 passes over a 333-tile row of a tensor, each
    tile loaded, exponentiated and stored back (the loops fast-forward)."""
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    from trnsim.options import Options
    from trnsim.timing import estimate_run

    @nki.jit
    def passes(x, reps):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(reps):
            for j in nl.affine_range(x.shape[1] // 64):
                t = nl.load(x[:, j * 64:(j + 1) * 64])
                nl.store(out[:, j * 64:(j + 1) * 64], value=nl.exp(t))
        return out

    x = np.zeros((128, 64 * 333), np.float32)

    def run():
        r = passes.run(x, 1001, options=Options(target="trn2", timing_only=True))
        return r, estimate_run(r)

    t, (r, est) = _best(run, repeat)
    n = len(r.traces[0])
    del r
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"million_instructions": n, "million_total_s": round(t, 2),
            "million_end_to_end_instr_per_s": round(n / t),
            "million_latency_ms": round(est.latency_us / 1e3, 1),
            "million_peak_python_mb": round(peak / 2 ** 20, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--million", action="store_true", help="also build a ~1M-instruction kernel")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs (the best is kept)")
    args = ap.parse_args()
    import trnsim.compat
    trnsim.compat.install()
    from trnsim.hardware import get_chip, get_core
    from trnsim.timing import CostModel, native

    out = {"native_available": native.available()}
    # 2048^3 GEMM end to end (best of --repeat), then under tracemalloc for its peak Python memory
    _, (res, est, t_run, t_sched) = _best(lambda: _gemm(2048), args.repeat)
    tracemalloc.start()
    _gemm(2048)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n = len(res.traces[0])
    out["gemm_2048_instructions"] = n
    out["gemm_2048_total_s"] = round(t_run + t_sched, 3)
    out["gemm_2048_trace_s"] = round(t_run, 3)
    out["gemm_2048_timing_s"] = round(t_sched, 3)
    out["gemm_2048_peak_python_mb"] = round(peak / 2 ** 20, 1)
    out["gemm_2048_latency_us"] = round(est.latency_us, 2)
    # every instruction executed (no fast-forward): the Python front end's own speed
    _, (res4, _, t_run4, t_sched4) = _best(lambda: _gemm(4096, fast_forward="off"), args.repeat)
    tr = res4.traces[0]
    out["gemm_4096_no_ff_instructions"] = len(tr)
    out["timing_only_execution_no_ff_instr_per_s"] = round(len(tr) / t_run4)
    out["gemm_4096_no_ff_end_to_end_instr_per_s"] = round(len(tr) / (t_run4 + t_sched4))
    _, (res4f, _, t_run4f, t_sched4f) = _best(lambda: _gemm(4096), args.repeat)
    out["gemm_4096_ff_end_to_end_instr_per_s"] = round(len(res4f.traces[0]) /
                                                       (t_run4f + t_sched4f))
    # scheduler replay of the recorded 4096^3 trace
    model = CostModel(get_core("trn2"), get_chip("trn2"))
    out["replay_instructions"] = len(tr)
    out.update({f"replay_{k}": v for k, v in _replay(tr, model, args.repeat).items()})
    if args.million:
        out.update(_million(args.repeat))
        syn = synthetic_trace(1_000_000)
        out["synthetic_instructions"] = len(syn)
        rep = _replay(syn, model, max(1, min(args.repeat, 2)), python=False)
        out.update({f"synthetic_{k}": v for k, v in rep.items()})
    out["process_max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    from trnsim.cli.output import console
    from rich.table import Table
    t = Table(title="trnsim timing-model speed")
    t.add_column("figure")
    t.add_column("value")
    for k, v in out.items():
        t.add_row(k, f"{v:,}" if isinstance(v, (int, float)) else str(v))
    console().print(t)


if __name__ == "__main__":
    main()
