"""Re-derive fabric.toml's [runtime.trn1] and [runtime.trn2] from the calibration rows, one figure per row set.

Each figure is solved so the model reproduces its rows (bisection on a monotone figure; launch and per-step
costs as a 2x2 linear solve), the others held; three passes settle the interplay.  Rows not named below are
held out (they check the fit: bench/collectives.py prints them).  Figures with no row are choices, named in
fabric.toml.

    python bench/collectives_fit.py [--json]
"""
import argparse
import dataclasses
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collectives as bench  # noqa: E402  (the rows and their readings)

GiB = 2 ** 30


def model(r, rt, size=None):
    """The row's metric predicted with runtime constants ``rt`` (time in us, or bus bandwidth in GB/s at 1 GiB)."""
    from trnsim.fabric.algorithms import ALGORITHMS
    from trnsim.fabric.collectives import best_schedule, bus_factor, ranks_for_count
    from trnsim.fabric.config import load_fabric_config
    from trnsim.fabric.runtime import group_topology
    from trnsim.fabric.schedule import RankSet
    from trnsim.fabric.topology import build_topology
    cfg = load_fabric_config()
    rt = rt.call(r["metric"] == "graph_time_us")  # the in-graph row pays the graph's fixed cost
    topo = build_topology(r["system"], r["n_instances"], r["lnc"]).with_runtime(rt)
    ranks = ranks_for_count(topo, r["ranks"])
    topo = group_topology(topo, ranks)
    s = size or (GiB if r["metric"] == "best_busbw_GBps" else r["size"])
    # the class's own curve at the row's size: each class is fitted where the runtime ran it (a prediction
    # then takes the least of it and the padded larger classes, fabric.runtime.padded_sizes)
    best, _, _ = best_schedule(topo, r["op"], s, RankSet(topo, ranks), cfg, tuple(ALGORITHMS), rt=rt, mode="runtime")
    t = best[0] + rt.launch_overhead_s
    if r["metric"] == "best_busbw_GBps":
        return s / t / 1e9 * bus_factor(r["op"], r["ranks"])
    return t * 1e6


def _solve(rows, rt, field, target_of, lo, hi):
    """Bisection (log scale) on ``field`` so the geometric mean of predicted / target over ``rows`` is 1."""
    def gap(x):
        cand = dataclasses.replace(rt, **{field: x})
        return sum(math.log(model(r, cand) / target_of(r)) for r in rows)
    a, b = math.log(lo), math.log(hi)
    ga = gap(lo)
    for _ in range(40):
        m = (a + b) / 2
        gm = gap(math.exp(m))
        if (gm > 0) == (ga > 0):
            a, ga = m, gm
        else:
            b = m
    return dataclasses.replace(rt, **{field: math.exp((a + b) / 2)})


def _latency(rows, rt):
    """Launch and per-step cost from two time rows: time = network + launch + step x messages is linear."""
    z = dataclasses.replace(rt, launch_overhead_s=0.0, step_overhead_s=0.0)
    one = dataclasses.replace(z, step_overhead_s=1e-6)
    net = [model(r, z) for r in rows]
    msgs = [model(r, one) - n for r, n in zip(rows, net)]  # us per 1 us of step cost = messages
    (r1, r2), (n1, n2), (k1, k2) = rows, net, msgs
    m = ((r1["value"] - n1) - (r2["value"] - n2)) / (k1 - k2)
    launch = r1["value"] - n1 - k1 * m
    return dataclasses.replace(rt, launch_overhead_s=launch * 1e-6, step_overhead_s=m * 1e-6)


def _row(rows, rid):
    return next(r for r in rows if r["id"] == rid)


def fit_trn2(rt):
    """trn2: core-pair rate P213 P217, core DMA rate P216, launch and step P207 P222, mesh P208, RDH P209,
    rings P211, the in-graph call cost P046."""
    rows = bench.trn2_rows()
    pair = [_row(rows, "P213"), _row(rows, "P217")]
    g = math.sqrt(pair[0]["value"] * pair[1]["value"])
    for _ in range(3):
        rt = _solve(pair, rt, "core_pair_bytes_per_s", lambda r: g, 1e9, 1e12)
        rt = _solve([_row(rows, "P216")], rt, "core_dma_bytes_per_s", lambda r: r["value"], 1e9, 1e12)
        rt = _latency([_row(rows, "P207"), _row(rows, "P222")], rt)
        rt = _solve([_row(rows, "P208")], rt, "mesh_efficiency", lambda r: r["value"], 1e-4, 1.0)
        rt = _solve([_row(rows, "P209")], rt, "rdh_efficiency", lambda r: r["value"], 1e-4, 1.0)
        rt = _solve([_row(rows, "P211")], rt, "bandwidth_efficiency", lambda r: r["value"], 1e-4, 1.0)
    rt = _solve([_row(rows, "P046")], rt, "graph_call_overhead_s", lambda r: r["value"], 1e-7, 1e-3)
    return rt


def fit_trn1(rt):
    """trn1: launch and step C023 C031, mesh C029, RDH C075, EFA C081 (core rates and ring efficiency as
    given: no trn1 row isolates them)."""
    rows = [r for r in bench.rows() if r["metric"] == "time_us"]
    for _ in range(3):
        rt = _latency([_row(rows, "C023"), _row(rows, "C031")], rt)
        rt = _solve([_row(rows, "C029")], rt, "mesh_efficiency", lambda r: r["value"], 1e-4, 1.0)
        rt = _solve([_row(rows, "C075")], rt, "rdh_efficiency", lambda r: r["value"], 1e-4, 1.0)
        rt = _solve([_row(rows, "C081")], rt, "efa_efficiency", lambda r: r["value"], 1e-4, 1.0)
    return rt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from trnsim.fabric.config import load_fabric_config
    cfg = load_fabric_config()
    trn2 = fit_trn2(cfg.runtime("trn2"))
    # trn1's core-to-core and ring rates: trn2's (no trn1 row isolates them)
    trn1 = fit_trn1(dataclasses.replace(cfg.runtime("trn1"), core_dma_bytes_per_s=trn2.core_dma_bytes_per_s,
                                        graph_call_overhead_s=trn2.graph_call_overhead_s,
                                        core_pair_bytes_per_s=trn2.core_pair_bytes_per_s,
                                        bandwidth_efficiency=trn2.bandwidth_efficiency))
    out = {k: dataclasses.asdict(v) for k, v in (("trn1", trn1), ("trn2", trn2))}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"[runtime.{k}]")
            for f, x in v.items():
                print(f"  {f} = {x:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
