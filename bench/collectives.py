"""Collectives: calibration rows predicted vs published, and how fast the fabric simulator runs.

1. bench/data/collectives.csv (copied from shared/calibration/collectives.csv, rows C023-C030: a
   32-rank all-gather on trn1.32xlarge from the nccom-test guide) predicted vs published, with the error.
   busbw is compared in GiB/s, the unit the guide prints.
2. Wall time to simulate an all-reduce over 1,024 chips (64 x trn2.48xlarge; target < 1 s) and over
   1,048,576 chips (65,536 x trn2.48xlarge, hierarchically; target < 10 s).
3. The fast path the model layer uses (FabricComm, closed forms per algorithm): time per call for a new
   (op, group) and for a new size of a known group (target < 1 ms), and its gap to the flow simulator.
4. All-reduce at the fabric's nominal link rate and with its runtime constants (what the estimators charge).

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


FAST_GROUPS = [  # (system, instances, lnc, ranks): shapes the model layer asks for (TP, DP, EP groups)
    ("trn1.32xlarge", 1, 1, tuple(range(8))), ("trn1.32xlarge", 1, 1, tuple(range(32))),
    ("trn1.32xlarge", 16, 1, tuple(range(0, 512, 32))), ("trn1.32xlarge", 16, 1, tuple(range(0, 512, 8))),
    ("trn2.48xlarge", 1, 2, tuple(range(4))), ("trn2.48xlarge", 1, 2, tuple(range(16))),
    ("trn2.48xlarge", 1, 2, tuple(range(64))), ("trn2.48xlarge", 4, 2, tuple(range(0, 256, 8))),
    ("trn2-ultraserver", 1, 2, tuple(range(64))), ("trn3-gen1", 1, 2, tuple(range(256))),
]
FAST_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
FAST_SIZES = (4096, 2 ** 20, 64 * 2 ** 20, GiB)


def fast_path():
    """Per group: CPU ms of the first call of each op (closed forms built), CPU us of a new size afterwards
    (CPU time, not wall: the bench machine is shared), and the largest relative gap to the flow simulator."""
    from trnsim.fabric import FabricComm
    FabricComm("trn1.32xlarge", runtime=False).time_s("all-reduce", 1.0, (0, 2))  # imports, routes of trn1
    out = []
    for system, inst, lnc, ranks in FAST_GROUPS:
        fast = FabricComm(system, inst, lnc, runtime=False)
        sim = FabricComm(system, inst, lnc, runtime=False, simulate=True)
        first, again, gap, t_sim = [], [], 0.0, 0.0
        for op in FAST_OPS:
            for i, size in enumerate(FAST_SIZES):
                t = time.process_time()
                ft = fast.time_s(op, size, ranks)
                (first if i == 0 else again).append(time.process_time() - t)
                t = time.process_time()
                st = sim.time_s(op, size, ranks)
                t_sim += time.process_time() - t
                gap = max(gap, abs(ft / st - 1))
        out.append(dict(system=f"{inst} x {system}" if inst > 1 else system, lnc=lnc, ranks=len(ranks),
                        group=f"{ranks[0]}..{ranks[-1]} step {ranks[1] - ranks[0]}",
                        new_group_ms=1e3 * sum(first) / len(first), new_size_us=1e6 * sum(again) / len(again),
                        sim_ms_per_call=1e3 * t_sim / (len(FAST_OPS) * len(FAST_SIZES)), max_gap=gap))
    return out


VERSUS = [("trn1.32xlarge", 1, 8, 2 * 2 ** 20), ("trn1.32xlarge", 1, 32, 64 * 2 ** 20),
          ("trn2.48xlarge", 2, 32, GiB), ("trn2.48xlarge", 2, 64, GiB), ("trn2-ultraserver", 2, 256, GiB)]


def versus_placeholder():
    """All-reduce of the first n ranks: fabric nominal and with runtime constants (what the estimators charge)."""
    from trnsim.fabric import FabricComm
    out = []
    for system, lnc, n, size in VERSUS:
        ranks = tuple(range(n))
        algo, nominal = FabricComm(system, lnc=lnc, runtime=False).choose("all-reduce", size, ranks)
        out.append(dict(system=system, ranks=n, size_bytes=size, algorithm=algo, fabric_nominal_us=1e6 * nominal,
                        fabric_runtime_us=1e6 * FabricComm(system, lnc=lnc).time_s("all-reduce", size, ranks)))
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
    fp = fast_path()
    vs = versus_placeholder()
    if args.json:
        print(json.dumps(dict(calibration=cal, speed=sp, fast_path=fp, versus_placeholder=vs), indent=2))
        return 0
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
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
    t = Table(title="Fast path (FabricComm, closed forms) per call, CPU time, mean over ops; gap to the flow "
                    f"simulator over {len(FAST_OPS)} ops x {len(FAST_SIZES)} sizes", title_justify="left")
    for c in ("system", "lnc", "ranks", "group", "new (op, group) ms", "new size us", "simulator ms/call",
              "max gap"):
        t.add_column(c)
    for r in fp:
        t.add_row(r["system"], str(r["lnc"]), str(r["ranks"]), r["group"], f"{r['new_group_ms']:.2f}",
                  f"{r['new_size_us']:.0f}", f"{r['sim_ms_per_call']:.1f}", f"{100 * r['max_gap']:.1f}%")
    con.print(t)
    t = Table(title="All-reduce: fabric nominal vs with runtime constants (us)", title_justify="left")
    for c in ("system", "ranks", "size", "algorithm", "fabric nominal", "fabric + runtime"):
        t.add_column(c)
    for r in vs:
        t.add_row(r["system"], str(r["ranks"]), f"{r['size_bytes']:.0f}", r["algorithm"],
                  f"{r['fabric_nominal_us']:.1f}", f"{r['fabric_runtime_us']:.1f}")
    con.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
