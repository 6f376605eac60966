"""Speed of the timing model.

    python bench/timing_speed.py [--json] [--million]

Prints:
  - timing-only kernel execution (the kernel's Python runs, every ISA call is validated and traced,
    numerics skipped) in instructions per second;
  - the scheduler alone (dependencies + list scheduling) replaying the recorded trace, in simulated
    instructions per second;
  - wall time and peak memory to time a 2048^3 bf16 GEMM kernel end to end (SCALE-Sim, for scale,
    needs about a minute and 1 GB for a 1024^3 GEMM on this machine);
  - with --million: peak memory of a kernel of about one million instructions (timing-only).
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


def _gemm(n, target="trn2"):
    import ml_dtypes
    import numpy as np
    from ladder_kernels import trn1_fully_optimized
    from trnsim.options import Options
    from trnsim.timing import dependencies, estimate_run, schedule
    bm = max(1, min(16, n // 128))
    bk = max(1, min(8, n // 128))
    bn = max(1, min(2, n // 512))
    a = np.zeros((n, n), dtype=ml_dtypes.bfloat16)
    b = np.zeros((n, n), dtype=ml_dtypes.bfloat16)
    t0 = time.perf_counter()
    res = trn1_fully_optimized.run(a, b, BM=bm, BN=bn, BK=bk,
                                   options=Options(target=target, timing_only=True))
    t1 = time.perf_counter()
    est = estimate_run(res)
    t2 = time.perf_counter()
    return res, est, t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--million", action="store_true", help="also build a ~1M-instruction kernel")
    args = ap.parse_args()
    import trnsim.compat
    trnsim.compat.install()
    from trnsim.hardware import get_chip, get_core
    from trnsim.timing import CostModel, dependencies, schedule

    out = {}
    # 2048^3 GEMM end to end
    tracemalloc.start()
    res, est, t_run, t_sched = _gemm(2048)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n = len(res.traces[0])
    out["gemm_2048_instructions"] = n
    out["gemm_2048_total_s"] = round(t_run + t_sched, 2)
    out["gemm_2048_trace_s"] = round(t_run, 2)
    out["gemm_2048_timing_s"] = round(t_sched, 2)
    out["gemm_2048_peak_python_mb"] = round(peak / 2 ** 20, 1)
    out["gemm_2048_latency_us"] = round(est.latency_us, 2)
    out["timing_only_execution_instr_per_s"] = round(n / t_run)
    # scheduler replay on a larger trace
    res4, _, t_run4, _ = _gemm(4096)
    tr = res4.traces[0]
    model = CostModel(get_core("trn2"), get_chip("trn2"))
    t = time.perf_counter()
    deps = dependencies(tr)
    t_deps = time.perf_counter() - t
    t = time.perf_counter()
    schedule(tr, model, deps)
    t_s = time.perf_counter() - t
    out["replay_instructions"] = len(tr)
    out["replay_deps_instr_per_s"] = round(len(tr) / t_deps)
    out["replay_schedule_instr_per_s"] = round(len(tr) / t_s)
    out["replay_total_instr_per_s"] = round(len(tr) / (t_deps + t_s))
    if args.million:
        import ml_dtypes
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        from trnsim.options import Options

        @nki.jit
        def many(x, reps):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            for i in nl.affine_range(reps):
                t = nl.exp(t)
            nl.store(out, value=t)
            return out

        tracemalloc.start()
        t = time.perf_counter()
        r = many.run(np.zeros((128, 64), np.float32), 1_000_000,
                     options=Options(target="trn2", timing_only=True))
        out["million_record_s"] = round(time.perf_counter() - t, 1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["million_instructions"] = len(r.traces[0])
        out["million_trace_peak_python_mb"] = round(peak / 2 ** 20, 1)
    out["process_max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    t = Table(title="trnsim timing-model speed")
    t.add_column("figure")
    t.add_column("value")
    for k, v in out.items():
        t.add_row(k, f"{v:,}" if isinstance(v, (int, float)) else str(v))
    Console().print(t)


if __name__ == "__main__":
    main()
