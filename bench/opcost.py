"""Per-op costs from simulated reference kernels: cold cache build, warm lookups, matmul efficiency.

    python bench/opcost.py [--json] [--targets trn1,trn2,trn3] [--kernels matmul,attention,...]

For each generation, into a fresh temporary cache directory (your own cache is left alone):
  - the cold cache build (in --workers processes): every grid point of every reference kernel simulated timing-only
    (``SimulatedOpCosts.warm``), wall time and number of simulations, with a progress bar;
  - warm lookup time per op: a mix of exact grid hits and interpolated shapes, timed over repeats
    on a fresh instance reading the cache from disk (first lookup) and from memory (afterwards);
  - simulated matmul efficiency over the grid: achieved FLOP/s / the Tensor engine's peak
    (2 x 128 x 128 x clock) per dtype, as min / median / max and at the largest square shape.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))


def lookup_ops():
    """A mix of ops a transformer layer asks for: grid hits and shapes between grid points."""
    from trnsim.model.ops import Op
    return [
        Op(kind="matmul", name="qkv", m=2048, k=4096, n=6144),
        Op(kind="matmul", name="mlp_up", m=2048, k=4096, n=14336),
        Op(kind="matmul", name="decode", m=4, k=4096, n=4096),
        Op(kind="matmul", name="grid_hit", m=512, k=2048, n=2048),
        Op(kind="attention", name="attn", q_len=2048, kv_len=2048, head_dim=128, heads=8, causal=True),
        Op(kind="attention", name="attn_decode", q_len=1, kv_len=3000, head_dim=128, heads=8),
        Op(kind="norm", name="rmsnorm", rows=2048, cols=4096),
        Op(kind="softmax", name="softmax", rows=3000, cols=5000),
        Op(kind="elementwise", name="swiglu", rows=2048, cols=14336),
        Op(kind="optimizer", name="adamw", rows=4096, cols=4096, dtype="float32"),
    ]


def matmul_efficiency(costs, target):
    """Achieved / peak Tensor-engine FLOP/s at every cached matmul grid point, per dtype."""
    from trnsim.hardware import load_catalog
    from trnsim.model.opcost.keys import shape_text
    core = load_catalog().core_for(target)
    peak = 2.0 * core.tensor.max_contraction * core.tensor.max_stationary_free * core.clocks.tensor_hz
    out = {}
    grid = costs.grids["matmul"]
    for dt in grid.dtypes:
        effs = {}
        for p in grid.points():
            key = ("matmul", costs.version("matmul"), shape_text(p), dt)
            t = costs._load().get(key)
            if t is not None:
                effs[(p["m"], p["k"], p["n"])] = 2.0 * p["m"] * p["k"] * p["n"] / t / peak
        if effs:
            big = max(effs, key=lambda s: (s[0] == s[1] == s[2], s[0] * s[1] * s[2]))
            out[dt] = {"min": min(effs.values()), "median": statistics.median(effs.values()),
                       "max": max(effs.values()), "largest_square": list(big), "at_largest": effs[big],
                       "points": len(effs)}
    return out


def _cpu_seconds():
    """User + system CPU seconds of this process and its finished children (the pool's workers):
    on a shared machine this, not wall time, says what the build costs."""
    import resource
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run(targets, kernels=None, repeat=200, workers=1):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from trnsim.kernels import time_reference
    from trnsim.model.opcost import SimulatedOpCosts
    results = {}
    for target in targets:
        with tempfile.TemporaryDirectory() as d:
            costs = SimulatedOpCosts(target, cache_dir=d, timer=time_reference, lnc=1)
            with Progress(TextColumn(f"cold build {target}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("{task.description}"),
                          transient=True) as bar:
                task = bar.add_task("", total=None)

                def progress(done, total, label):
                    bar.update(task, completed=done, total=total, description=label)
                cpu0 = _cpu_seconds()
                t0 = time.perf_counter()
                n = costs.warm(progress=progress, kernels=kernels, workers=workers)
                cold = time.perf_counter() - t0
                cpu = _cpu_seconds() - cpu0
            import sqlite3
            con = sqlite3.connect(costs.cache.path)
            per_kernel = {k: round(w, 2) for k, w in con.execute(
                "SELECT kernel, SUM(sim_wall_s) FROM op_times GROUP BY kernel ORDER BY 2 DESC")}
            con.close()
            ops = lookup_ops() if kernels is None else []
            fresh = SimulatedOpCosts(target, cache_dir=d, timer=None, lnc=1)
            t0 = time.perf_counter()
            first = [fresh.time(op) for op in ops]
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(repeat):
                for op in ops:
                    fresh.time(op)
            per_op = (time.perf_counter() - t0) / max(1, repeat * len(ops))
            # a new instance per estimate (the planner's worker processes): rows from disk each time
            t0 = time.perf_counter()
            for _ in range(20):
                inst = SimulatedOpCosts(target, cache_dir=d, timer=None, lnc=1)
                for op in ops:
                    inst.time(op)
            per_instance = (time.perf_counter() - t0) / 20
            results[target] = {
                "cold_build_s": round(cold, 2), "cold_build_cpu_s": round(cpu, 2),
                "load_average_1min": round(os.getloadavg()[0], 2), "simulations": n, "workers": workers,
                "sim_wall_s": round(costs.sim_wall_s, 2), "sim_wall_s_per_kernel": per_kernel,
                "first_lookups_s": round(first_s, 4), "ops": len(ops),
                "warm_lookup_us_per_op": round(per_op * 1e6, 2),
                "fresh_instance_lookups_ms": round(per_instance * 1e3, 2),
                "lookups": [{"op": op.name, "seconds": t.seconds, "how": t.how} for op, t in zip(ops, first)],
                "matmul_efficiency": matmul_efficiency(costs, target),
            }
    return results


def table(res):
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
    t = Table(title="op-cost table: cold cache build and warm lookups (one generation each)")
    for c in ("target", "cold build s", "CPU s", "load avg", "simulations", "slowest (sim s)", "first lookups s",
              "new instance ms", "lookup us/op"):
        t.add_column(c)
    for tg, r in res.items():
        slow = ", ".join(f"{k} {v:.0f}" for k, v in list(r["sim_wall_s_per_kernel"].items())[:2])
        t.add_row(tg, f"{r['cold_build_s']:.1f}", f"{r['cold_build_cpu_s']:.1f}", f"{r['load_average_1min']:.1f}",
                  str(r["simulations"]), slow, f"{r['first_lookups_s']:.4f}",
                  f"{r['fresh_instance_lookups_ms']:.1f}", f"{r['warm_lookup_us_per_op']:.1f}")
    con.print(t)
    t2 = Table(title="simulated matmul efficiency over the grid (achieved / Tensor-engine peak)")
    for c in ("target", "dtype", "points", "min", "median", "max", "largest square", "there"):
        t2.add_column(c)
    for tg, r in res.items():
        for dt, e in r["matmul_efficiency"].items():
            t2.add_row(tg, dt, str(e["points"]), f"{e['min']:.1%}", f"{e['median']:.1%}", f"{e['max']:.1%}",
                       "x".join(map(str, e["largest_square"])), f"{e['at_largest']:.1%}")
    con.print(t2)
    t3 = Table(title="sample lookups")
    for c in ("target", "op", "us", "how"):
        t3.add_column(c)
    for tg, r in res.items():
        for row in r["lookups"]:
            t3.add_row(tg, row["op"], f"{row['seconds'] * 1e6:.1f}", row["how"])
    con.print(t3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--targets", default="trn1,trn2,trn3")
    ap.add_argument("--kernels", default=None, help="comma-separated subset of the reference kernels")
    ap.add_argument("--workers", type=int, default=1, help="processes for the cold build")
    args = ap.parse_args(argv)
    from trnsim.errors import TrnsimError
    try:
        res = run([t.strip() for t in args.targets.split(",") if t.strip()],
                  args.kernels.split(",") if args.kernels else None, workers=args.workers)
    except TrnsimError as e:
        if args.json:
            print(json.dumps({"error": str(e), "rule": e.rule}))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
