"""Functional simulation speed: our blocked bf16 matmul kernel on [M,K] x [K,N] run with full
numerics, next to plain numpy computing the same product in fp32 on this machine.

    python bench/functional_matmul.py [--size 4096x8192x8192] [--repeat 3] [--json]
                                      [--clock wall|cpu]

Prints wall times, their ratio, and where the simulator's time goes: the BLAS floor (the same
number of 128x128x512 fp32 products numpy would need on their own), bf16->fp32 operand
conversion, and everything else (Python bookkeeping: validation, regions, trace records).
Both wall times are the best of --repeat runs, taken alternately (shared machines drift by 10-20%
between runs; the best run is the least disturbed one, on both sides); every run is listed too.
``--clock cpu`` times this process's CPU time instead of wall time: steadier on a machine shared
with other work, and meaningful with single-threaded BLAS (OPENBLAS_NUM_THREADS=1; with more threads
it also counts BLAS threads spinning).
``queued_psum_accumulate`` says whether the PSUM accumulations ran on the worker thread that
overlaps them with the bookkeeping (TRNSIM_ASYNC_GEMM; unset, only where the machine has a core
beside numpy's BLAS threads, e.g. under OPENBLAS_NUM_THREADS=1, which makes the numpy side
single-threaded too); ``load_average`` shows others' work on a shared machine.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="4096x8192x8192", help="MxKxN")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best is kept")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time, steadier on a loaded shared machine")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    M, K, N = (int(x) for x in args.size.split("x"))
    import trnsim.compat
    trnsim.compat.install()
    import ml_dtypes
    import numpy as np
    from ladder_kernels import trn1_fully_optimized
    from trnsim.nki.core import fastpath
    from trnsim.nki.core.fastpath import gemm_ready
    from trnsim.options import Options

    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((K, M), dtype=np.float32).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N), dtype=np.float32).astype(ml_dtypes.bfloat16)

    # numpy: the same product in fp32 (inputs already upcast, as a fair baseline)
    a32 = lhsT.astype(np.float32)
    b32 = rhs.astype(np.float32)
    bm = max(1, min(16, M // 128))
    bk = max(1, min(8, K // 128))
    bn = max(1, min(2, N // 512))
    t_numpy = t_sim = float("inf")
    runs_numpy, runs_sim = [], []
    from contextlib import nullcontext
    from trnsim.cli.output import console, error_console
    n = max(1, args.repeat)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    status = nullcontext() if args.json else error_console().status("")
    with status:
        for r in range(n):
            if not args.json:
                status.update(f"run {r + 1} of {n}: numpy fp32, then trnsim")
            t = clock()
            ref = a32.T @ b32
            runs_numpy.append(clock() - t)
            t = clock()
            res = trn1_fully_optimized.run(lhsT, rhs, BM=bm, BN=bn, BK=bk,
                                           options=Options(target="trn1"))
            runs_sim.append(clock() - t)
    t_numpy, t_sim = min(runs_numpy), min(runs_sim)
    out = res.outputs.astype(np.float32)
    rel = float(np.abs(out - ref).max() / np.abs(ref).max())
    n_mm = sum(1 for i in res.traces[0] if i.opcode == "nc_matmul")
    n_ins = len(res.traces[0])

    # the BLAS floor: n_mm products of the simulator's shape, in fp32
    s = rng.standard_normal((128, 128), dtype=np.float32)
    mv = rng.standard_normal((128, 512), dtype=np.float32)
    sb = s.astype(ml_dtypes.bfloat16)
    mb = mv.astype(ml_dtypes.bfloat16)
    t_blas = t_conv = float("inf")
    reps = 40
    for _ in range(5):  # best of 5 batches, like the wall times above
        t = clock()
        for _ in range(reps):
            s.T @ mv
        t_blas = min(t_blas, (clock() - t) / reps * n_mm)
        t = clock()
        for _ in range(reps):
            sb.astype(np.float32)
            mb.astype(np.float32)
        t_conv = min(t_conv, (clock() - t) / reps * n_mm)
    result = {
        "shape": [M, K, N], "repeat": max(1, args.repeat), "numpy_fp32_s": round(t_numpy, 3),
        "trnsim_s": round(t_sim, 3),
        "ratio": round(t_sim / t_numpy, 2),
        "ratio_median": round(statistics.median(runs_sim) / statistics.median(runs_numpy), 2),
        "runs_numpy_s": [round(x, 3) for x in runs_numpy],
        "runs_trnsim_s": [round(x, 3) for x in runs_sim], "clock": args.clock,
        "max_rel_error": rel, "matmul_instructions": n_mm,
        "instructions": n_ins, "blas_floor_s": round(t_blas, 3),
        "operand_conversion_s": round(t_conv, 3),
        "other_s": round(t_sim - t_blas - t_conv, 3),
        "other_us_per_instruction": round((t_sim - t_blas - t_conv) / n_ins * 1e6, 1),
        # psum += nc_matmul(...) as one BLAS call adding into PSUM (nki/core/fastpath.gemm_acc)
        "fused_psum_accumulate": gemm_ready(),
        # ... and queued for the worker thread that overlaps it with the bookkeeping
        # (TRNSIM_ASYNC_GEMM; unset: only with a core to spare beside numpy's BLAS threads)
        "queued_psum_accumulate": gemm_ready() and fastpath.ASYNC,
        # 1-minute load average before the runs and after: others' work on a shared machine
        # shows here (the figures above are only comparable on a quiet one)
        "load_average": [round(x, 2) for x in (load_before[0], os.getloadavg()[0])]
        if load_before else None,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    from rich.table import Table
    t = Table(title=f"functional bf16 matmul [{M},{K}] x [{K},{N}]: trnsim vs numpy fp32")
    t.add_column("figure")
    t.add_column("value")
    for k, v in result.items():
        t.add_row(k, str(v))
    console().print(t)


if __name__ == "__main__":
    main()
