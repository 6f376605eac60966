"""trnsim compare: the comparison table for three models x five systems, the GPU calibration rows predicted
by the model-level GPU estimator vs published (shared/calibration/gpus.csv), and wall times (target: one
compare of eight systems < 30 s warm on 2 cores).

Prices: published on-demand where prices.toml has one; the systems without one get BENCH_PRICES below,
which are assumptions for timing and illustration only, not quotes.

    python bench/compare.py [--json]
"""
import argparse
import json
import sys
import time

MODELS = ("llama-3-8b", "llama-3.1-70b", "mixtral-8x7b")
FIVE = ("trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge")
EIGHT = ("trn1.32xlarge", "trn2.48xlarge", "trn2-ultraserver", "trn3-gen2", "p5.48xlarge", "p5en.48xlarge",
         "p6-b200.48xlarge", "gb300-nvl72")
# assumptions (no published on-demand price): trn2.48xlarge from the trn2.3xlarge capacity block (P283) x 16
# chips; an UltraServer as 4 trn2.48xlarge; trn3 Gen2 at 2x trn2 per chip x 144 chips; GB300 NVL72 at the
# p6-b200 per-GPU price (P279 / 8) x 72 x 1.3
BENCH_PRICES = {"trn2.48xlarge": 35.76, "trn2-ultraserver": 4 * 35.76, "trn3-gen2": 2 * 35.76 / 16 * 144,
                "gb300-nvl72": 113.93 / 8 * 72 * 1.3}


def _one(model, systems, tokens):
    from trnsim.compare import Workload, compare
    from trnsim.cost import PriceBook
    t0 = time.perf_counter()
    c = compare(Workload(model=model, task="train", tokens=tokens), list(systems),
                PriceBook.load(overrides=BENCH_PRICES), baseline="p5.48xlarge")
    return c, time.perf_counter() - t0


def run():
    """All figures as plain data."""
    from trnsim.model.gpu.refit import predict_rows
    out = {"tables": {}, "timings": {}}
    t0 = time.perf_counter()
    for m in MODELS:
        c, dt = _one(m, FIVE, 1e12)
        out["tables"][m] = [{k: r.to_dict()[k] for k in ("system", "config", "instances", "time_s", "cost_usd",
                                                         "usd_per_mtok", "energy_kwh", "price_performance")}
                            | {"mfu": r.choice.metrics.get("mfu")} for r in c.rows]
        out["timings"][f"compare {m} x 5 systems (cold for the first)"] = dt
    out["timings"]["three models x five systems"] = time.perf_counter() - t0
    _one("llama-3.1-70b", EIGHT, 1e12)
    c0 = time.process_time()
    c, dt = _one("llama-3.1-70b", EIGHT, 1e12)
    out["timings"]["compare llama-3.1-70b x 8 systems (warm)"] = dt
    out["timings"]["compare llama-3.1-70b x 8 systems (warm), CPU s"] = time.process_time() - c0
    out["eight"] = c.summary()
    t1 = time.perf_counter()
    out["calibration"] = [{"row": p.row, "system": p.gpu_system, "model": p.model, "precision": p.precision,
                           "gpus": p.gpus, "layout": p.layout, "published_step_s": p.published_step_s,
                           "predicted_step_s": p.predicted_step_s, "error": p.error} for p in predict_rows()]
    out["timings"]["calibration rows"] = time.perf_counter() - t1
    return out


def main(argv=None):
    """Print the tables (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    r = run()
    if args.json:
        json.dump(r, sys.stdout, indent=1)
        print()
        return 0
    for m, rows in r["tables"].items():
        print(f"\n{m}, 1e12 training tokens, 30-day deadline (bench prices for trn2: see BENCH_PRICES)")
        print(f"{'system':18s} {'inst':>5s} {'days':>6s} {'MFU':>5s} {'cost $':>12s} {'$/Mtok':>8s} {'MWh':>8s} "
              f"{'vs p5':>6s}  config")
        for x in rows:
            c = x["config"]
            print(f"{x['system']:18s} {x['instances']:5d} {x['time_s'] / 86400:6.1f} {x['mfu'] or 0:5.2f} "
                  f"{x['cost_usd']:12,.0f} {x['usd_per_mtok']:8.3f} {x['energy_kwh'] / 1e3:8.1f} "
                  f"{x['price_performance']:6.2f}  tp={c['tp']} pp={c['pp']} dp={c['dp']} {c['recompute']}")
    print("\nGPU calibration rows: the GPU estimator's best layout vs published step time")
    print(f"{'row':5s} {'system':17s} {'model':14s} {'prec':5s} {'GPUs':>4s} {'published':>9s} {'predicted':>9s} "
          f"{'error':>7s}  layout")
    for x in r["calibration"]:
        print(f"{x['row']:5s} {x['system']:17s} {x['model']:14s} {x['precision']:5s} {x['gpus']:4d} "
              f"{x['published_step_s']:9.2f} {x['predicted_step_s']:9.2f} {100 * x['error']:+6.1f}%  {x['layout']}")
    print(f"\n8 systems: {r['eight']}")
    print("\nwall times")
    for k, v in r["timings"].items():
        print(f"  {k:50s} {v:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
