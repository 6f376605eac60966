"""Parallelism planner speed and the best layouts of the issue's reference case.

1. Planner configurations per second for llama-3.1-70b on 4 x trn2-ultraserver (seq 8192, global batch
   1024; the default search space): on the local backend with 1 and 2 worker processes, and on a local
   Ray with 2 workers (target >= 200/s on 2 cores).  Three rates per run: enumerated configurations per
   second of the whole search (what the target counts), memory-checked configurations per second of the
   evaluation phase, and full model-level estimates per second.
2. The best ten layouts of that case, and whether every backend agrees on the ranking.
3. The same search on a GPU system (llama-3.1-70b on 32 x p5.48xlarge, 256 H100s), through the same code:
   its rate on one worker and its best five layouts.

    python bench/planner.py [--json] [--no-ray] [--comm fabric|fabric-sim]
"""
import argparse
import json
import os
import time

CASE = dict(model="llama-3.1-70b", system="trn2-ultraserver", count=4, seq=8192, global_batch=1024)
GPU_CASE = dict(model="llama-3.1-70b", system="p5.48xlarge", count=32, seq=8192, global_batch=1024)


def run(backend: str, workers: int, comm=None, case=CASE) -> dict:
    """One plan of the reference case; its rates and its ranking."""
    from trnsim.plan import plan
    t0, c0 = time.perf_counter(), time.process_time()
    r = plan(**case, backend=backend, workers=workers, comm=comm, keep_rows=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return dict(backend=backend, workers=workers, wall_s=wall, driver_cpu_s=cpu, enumerated=r.enumerated,
                memory_checked=r.memory_checked, estimated=r.estimated, configs_per_s=r.enumerated / wall,
                memory_checked_per_s=r.memory_checked / r.eval_wall_s,
                estimates_per_s=r.estimated / r.eval_wall_s, ranking=[(b.label, b.score) for b in r.best],
                result=r)


def main() -> int:
    """Print (or --json) the rates of each backend and the best ten layouts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    ap.add_argument("--comm", default=None, help="collectives model (default: the estimator's)")
    args = ap.parse_args()
    from trnsim.plan import plan
    plan(**dict(CASE, count=1), workers=1, space=dict(micro_batch=[1], recompute=["full"]))  # warm the catalog
    runs = [run("local", 1, args.comm)]
    cold_local = run("local", 2, args.comm)     # first use: the pool's workers start with cold caches
    runs.append(run("local", 2, args.comm))
    ray_note = (f"first local-pool plan {cold_local['wall_s']:.1f} s (workers starting); "
                f"pool and Ray figures below are each backend's second plan; ")
    if not args.no_ray:
        try:
            import ray
            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            ray_note += f"ray.init {time.perf_counter() - t0:.1f} s; "
            cold = run("ray", 2, args.comm)       # first use: Ray workers start and import trnsim
            ray_note += f"first Ray plan {cold['wall_s']:.1f} s (workers starting)"
            runs.append(run("ray", 2, args.comm))
            ray.shutdown()
        except ImportError:
            ray_note += "ray not installed (pip install 'trnsim[ray]'): Ray rates skipped"
    same = all(r["ranking"] == runs[0]["ranking"] for r in runs)
    best = runs[-1]["result"]
    gpu = run("local", 1, args.comm, GPU_CASE)
    if args.json:
        print(json.dumps(dict(case=CASE, runs=[{k: v for k, v in r.items() if k != "result"} for r in runs],
                              same_ranking=same, ray_note=ray_note, result=best.to_dict(),
                              gpu_case=GPU_CASE, gpu={k: v for k, v in gpu.items() if k != "result"},
                              gpu_result=gpu["result"].to_dict()), indent=2))
        return 0
    from trnsim.cli.output import console
    from rich.table import Table
    out = console()
    t = Table(title=f"Planner speed: {CASE['model']} on {CASE['count']} x {CASE['system']} (seq {CASE['seq']}, "
              f"global batch {CASE['global_batch']})", title_justify="left")
    for c in ("backend", "workers", "wall (s)", "enumerated", "configs/s", "memory-checked/s", "estimates/s"):
        t.add_column(c)
    for r in runs:
        t.add_row(r["backend"], str(r["workers"]), f"{r['wall_s']:.2f}", f"{r['enumerated']:,}",
                  f"{r['configs_per_s']:,.0f}", f"{r['memory_checked_per_s']:,.0f}", f"{r['estimates_per_s']:,.0f}")
    out.print(t)
    out.print(ray_note)
    out.print(f"one worker in-process: {runs[0]['driver_cpu_s']:.2f} CPU s for {runs[0]['wall_s']:.2f} s wall "
              f"(= {runs[0]['enumerated'] / runs[0]['driver_cpu_s']:,.0f} configurations per CPU second); "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    out.print(f"{best.memory_checked:,} memory-checked, {best.estimated:,} estimated; every backend gives the same "
              f"ranking: {'yes' if same else 'NO'}")
    d = Table(title="Dropped, by rule", title_justify="left")
    for c in ("rule", "dropped", "example", "why"):
        d.add_column(c)
    for x in best.dropped:
        d.add_row(x.rule, f"{x.count:,}", x.example, x.reason)
    out.print(d)
    b = Table(title="Best ten layouts (step time)", title_justify="left")
    for c in ("#", "layout", "step (s)", "tokens/s", "MFU", "GiB/core"):
        b.add_column(c)
    for x in best.best:
        b.add_row(str(x.rank), x.label, f"{x.step_time_s:.3f}", f"{x.tokens_per_s:,.0f}", f"{x.mfu:.1%}",
                  f"{x.memory_per_core_gib:.1f}/{x.hbm_per_core_gib:.0f}")
    out.print(b)
    for n in best.notes:
        out.print(f"note: {n}")
    g = gpu["result"]
    out.print(f"GPU system, same search: {GPU_CASE['model']} on {GPU_CASE['count']} x {GPU_CASE['system']} (seq "
              f"{GPU_CASE['seq']}, global batch {GPU_CASE['global_batch']}): {g.enumerated:,} enumerated in "
              f"{gpu['wall_s']:.2f} s ({gpu['configs_per_s']:,.0f}/s; {gpu['driver_cpu_s']:.2f} CPU s), "
              f"{g.estimated:,} estimated")
    b = Table(title="Best five layouts on the GPU system (step time)", title_justify="left")
    for c in ("#", "layout", "step (s)", "tokens/s", "MFU", "GiB/GPU"):
        b.add_column(c)
    for x in g.best[:5]:
        b.add_row(str(x.rank), x.label, f"{x.step_time_s:.3f}", f"{x.tokens_per_s:,.0f}", f"{x.mfu:.1%}",
                  f"{x.memory_per_core_gib:.1f}/{x.hbm_per_core_gib:.0f}")
    out.print(b)
    for n in g.notes:
        out.print(f"note: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
