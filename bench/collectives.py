"""Collectives: calibration rows predicted vs published, and how fast the fabric simulator runs.

1. bench/data/collectives.csv (copied from shared/calibration/collectives.csv, rows C023-C030: a
   32-rank all-gather on trn1.32xlarge from the nccom-test guide) predicted vs published, with the error.
   busbw is compared in GiB/s, the unit the guide prints.
2. Wall time to simulate an all-reduce over 1,024 chips (64 x trn2.48xlarge; target < 1 s) and over
   1,048,576 chips (65,536 x trn2.48xlarge, hierarchically; target < 10 s).

    python bench/collectives.py [--json]
    python bench/collectives.py --fit     # re-derive fabric.toml's [runtime.trn1] from the time rows
"""
import argparse
import csv
import dataclasses
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "collectives.csv")
GiB = 2 ** 30


def rows():
    """The calibration rows (id, size, metric, value, ranks, op)."""
    with open(DATA) as f:
        return [dict(id=r["id"], size=float(r["size_bytes"]), metric=r["metric"], value=float(r["value"]),
                     ranks=int(r["ranks"]), op=r["collective"], n_instances=int(r["n_instances"]))
                for r in csv.DictReader(f)]


def predicted_vs_published():
    """Each row with trnsim's prediction on trn1.32xlarge and the relative error."""
    from trnsim.fabric import collective
    out = []
    for r in rows():
        res = collective("trn1.32xlarge", r["op"], r["size"], ranks=r["ranks"], instances=r["n_instances"])
        if r["metric"] == "time_us":
            pred = res.time_us
        else:  # the guide prints busbw in GiB/s
            pred = res.busbw_gbps * 1e9 / GiB
        out.append(dict(id=r["id"], size_bytes=r["size"], metric=r["metric"], published=r["value"],
                        predicted=pred, error_pct=100 * (pred - r["value"]) / r["value"],
                        algorithm=res.algorithm))
    return out


def fit():
    """Least squares (relative) of launch overhead and bandwidth efficiency over the time_us rows."""
    import numpy as np
    from trnsim.fabric.algorithms import ALGORITHMS
    from trnsim.fabric.collectives import best_schedule, ranks_for_count
    from trnsim.fabric.config import load_fabric_config
    from trnsim.fabric.schedule import RankSet
    from trnsim.fabric.topology import build_topology
    cfg = load_fabric_config()
    base = build_topology("trn1.32xlarge")
    timed = [r for r in rows() if r["metric"] == "time_us"]
    best = None
    for eff in np.round(np.arange(0.01, 1.0001, 0.01), 2):
        topo = dataclasses.replace(base, efficiency=float(eff))
        net = []
        for r in timed:
            rs = RankSet(topo, ranks_for_count(topo, r["ranks"]))
            b, _, _ = best_schedule(topo, r["op"], r["size"], rs, cfg, tuple(ALGORITHMS))
            net.append(b[0] * 1e6)
        m = np.array([r["value"] for r in timed])
        net = np.array(net)
        w = 1 / m ** 2
        over = float(np.sum((m - net) * w) / np.sum(w))
        err = float(np.sum(((over + net - m) / m) ** 2))
        if best is None or err < best[0]:
            best = (err, float(eff), over)
    return dict(rows=[r["id"] for r in timed], bandwidth_efficiency=best[1], launch_overhead_s=best[2] * 1e-6,
                rms_relative_error=(best[0] / len(timed)) ** 0.5)


def speed():
    """Wall seconds to simulate an all-reduce over 1,024 and 1,048,576 chips (fresh, no cache)."""
    from trnsim.fabric import collective
    out = []
    for units, label in ((64, "1,024 chips (64 x trn2.48xlarge)"),
                         (65536, "1,048,576 chips (65,536 x trn2.48xlarge)")):
        t = time.perf_counter()
        res = collective("trn2.48xlarge", "all-reduce", 1 * GiB, instances=units)
        out.append(dict(system=label, chips=res.chips, ranks=res.ranks, wall_s=time.perf_counter() - t,
                        algorithm=res.algorithm, time_us=res.time_us, busbw_gbps=res.busbw_gbps,
                        hierarchical=res.hierarchical, folded=res.folded,
                        candidates=dict(res.candidates)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="re-derive the trn1 runtime constants from the rows")
    args = ap.parse_args(argv)
    if args.fit:
        res = fit()
        print(json.dumps(res, indent=2) if args.json else
              f"fit over {', '.join(res['rows'])}: launch_overhead_s = {res['launch_overhead_s']:.3g}, "
              f"bandwidth_efficiency = {res['bandwidth_efficiency']:.2f} "
              f"(rms relative error {100 * res['rms_relative_error']:.1f}%)")
        return 0
    cal = predicted_vs_published()
    sp = speed()
    if args.json:
        print(json.dumps(dict(calibration=cal, speed=sp), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table
    con = Console(highlight=False)
    t = Table(title="32-rank all-gather on trn1.32xlarge: predicted vs published (nccom-test guide)",
              title_justify="left")
    for c in ("row", "size", "metric", "published", "predicted", "error", "algorithm"):
        t.add_column(c)
    for r in cal:
        t.add_row(r["id"], f"{r['size_bytes']:.0f}", r["metric"], f"{r['published']:g}",
                  f"{r['predicted']:.3g}", f"{r['error_pct']:+.0f}%", r["algorithm"])
    con.print(t)
    t = Table(title="Simulation speed: all-reduce 1 GiB", title_justify="left")
    for c in ("system", "ranks", "wall s", "target", "algorithm", "time us", "busbw GB/s", "folded"):
        t.add_column(c)
    for r, target in zip(sp, ("< 1 s", "< 10 s")):
        t.add_row(r["system"], str(r["ranks"]), f"{r['wall_s']:.2f}", target, r["algorithm"],
                  f"{r['time_us']:.0f}", f"{r['busbw_gbps']:.1f}", "yes" if r["folded"] else "-")
    con.print(t)
    for r in sp:
        if r["folded"]:
            con.print(f"{r['system']}: simulated hierarchically; {r['folded']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
