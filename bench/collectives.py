"""Collectives: calibration rows predicted vs published, and how fast the fabric simulator runs.

1. The calibration rows predicted vs published, with |error| now and before the runtime calibration
   (bench/data/collectives_before.json) and the median per generation: bench/data/collectives.csv (copy of
   shared/calibration/collectives.csv: trn1 32-rank all-gather on one instance, 64-rank all-reduce on two)
   and bench/data/collectives_trn2.csv (the trn2 collective rows of shared/calibration/found-2026-11.csv,
   transcribed with the system each is read on).  busbw of the trn1 guide is in GiB/s, the unit it prints.
2. Wall time to time a 1 GiB all-reduce over 16 .. 1,048,576 trn2 chips from cold memos (targets: 1,024
   chips < 0.5 s, 1M chips < 1 s, never slower for fewer chips): candidates are bounded by their closed
   forms and only the competitive ones flow-simulated.
3. The fast path the model layer uses (FabricComm, closed forms per algorithm): time per call for a new
   (op, group) and for a new size of a known group (target < 1 ms), and its gap to the flow simulator.
4. All-reduce at the fabric's nominal link rate and with its runtime constants (what the estimators charge).

    python bench/collectives.py [--json]
    python bench/collectives.py --calibration   # only the calibration rows
    python bench/collectives_fit.py             # re-derive fabric.toml's [runtime.trn1] and [runtime.trn2]
"""
import argparse
import csv
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "collectives.csv")
GiB = 2 ** 30


TRN2 = os.path.join(HERE, "data", "collectives_trn2.csv")
BEFORE = os.path.join(HERE, "data", "collectives_before.json")
SWEEP = [2.0 ** k for k in range(10, 31)]
# rows the runtime constants were solved from (bench/collectives_fit.py); the others are held out
FITTED = {"C023", "C031", "C029", "C075", "C081", "P207", "P222", "P208", "P209", "P211", "P213", "P217", "P216",
          "P046"}  # 1 KiB .. 1 GiB, for the "best bus bandwidth" rows


def rows():
    """The trn1 calibration rows (id, size, metric, value, ranks, op, instances): nccom-test guide examples."""
    with open(DATA) as f:
        return [dict(id=r["id"], size=float(r["size_bytes"]), metric=r["metric"], value=float(r["value"]),
                     ranks=int(r["ranks"]), op=r["collective"], n_instances=int(r["n_instances"]),
                     system="trn1.32xlarge", lnc=1,
                     group="trn1, two instances" if int(r["n_instances"]) > 1 else "trn1, one instance")
                for r in csv.DictReader(f)]


def trn2_rows():
    """The trn2 collective rows of found-2026-11.csv, transcribed with the system each is read on."""
    with open(TRN2) as f:
        return [dict(id=r["id"], size=float(r["size_bytes"]), metric=r["metric"], value=float(r["value"]),
                     ranks=int(r["ranks"]), op=r["collective"], n_instances=int(r["instances"]),
                     system=r["system"], lnc=int(r["lnc"]), group="trn2") for r in csv.DictReader(f)]


def _predict(r):
    from trnsim.fabric import collective, load_fabric_config
    if r["metric"] == "efa_step_us":  # a latency row: the figure fabric.toml takes from it
        return load_fabric_config().efa_step_s * 1e6, "-"
    in_graph = r["metric"] == "graph_time_us"  # a model's collective; the others are launched on their own
    def run(size):
        return collective(r["system"], r["op"], size, ranks=r["ranks"], instances=r["n_instances"], lnc=r["lnc"],
                          in_graph=in_graph)
    if r["metric"] == "best_busbw_GBps":
        best = max((run(s) for s in SWEEP), key=lambda x: x.busbw_gbps)
        return best.busbw_gbps, best.algorithm
    res = run(r["size"])
    if r["metric"] in ("time_us", "graph_time_us"):
        return res.time_us, res.algorithm
    return res.busbw_gbps * 1e9 / GiB, res.algorithm  # the nccom-test guide prints busbw in GiB/s


def predicted_vs_published():
    """Every calibration row with trnsim's prediction, the relative error and the error of the recorded
    earlier model (bench/data/collectives_before.json); busbw rows of the trn1 guide are shown, not scored
    (each repeats its time row: busbw = size / time x factor)."""
    before = {}
    if os.path.exists(BEFORE):
        with open(BEFORE) as f:
            before = json.load(f)["predicted"]
    out = []
    for r in rows() + trn2_rows():
        pred, algo = _predict(r)
        old = before.get(r["id"])
        out.append(dict(id=r["id"], group=r["group"], op=r["op"], ranks=r["ranks"], size_bytes=r["size"],
                        metric=r["metric"], published=r["value"], predicted=pred,
                        error_pct=100 * (pred - r["value"]) / r["value"] if r["value"] else float("nan"),
                        before=old, before_error_pct=(100 * (old - r["value"]) / r["value"]
                                                      if old is not None and r["value"] else None),
                        scored=r["metric"] not in ("busbw_GBps", "efa_step_us"), algorithm=algo,
                        role="fitted" if r["id"] in FITTED else "held out"))
    return out


def medians(cal):
    """Median |error| per generation group, now and before (scored rows only), and over held-out rows."""
    import statistics
    out = {}
    for g in ("trn1, one instance", "trn1, two instances", "trn2"):
        rs = [r for r in cal if r["group"] == g and r["scored"]]
        held = [abs(r["error_pct"]) for r in rs if r["role"] == "held out"]
        out[g] = dict(rows=len(rs), median_abs_error_pct=statistics.median(abs(r["error_pct"]) for r in rs),
                      before_median_abs_error_pct=(statistics.median(abs(r["before_error_pct"]) for r in rs)
                                                   if all(r["before_error_pct"] is not None for r in rs) else None),
                      held_out_rows=len(held), held_out_median_abs_error_pct=statistics.median(held) if held else None)
    return out


SPEED_LADDER = (1, 4, 16, 64, 1024, 65536)  # trn2.48xlarge instances: 16 .. 1,048,576 chips


def _cold():
    """Forget every memo the fabric keeps (collective results, step pieces, routes, topologies)."""
    from trnsim.fabric import closed_form, collectives, topology
    collectives._cached.cache_clear()
    closed_form._STEP_MEMO.clear()
    topology.route_table.cache_clear()


def speed():
    """Wall seconds to time a 1 GiB all-reduce over 16 .. 1,048,576 trn2 chips, each from cold memos (targets:
    1,024 chips < 0.5 s, 1M chips < 1 s, never slower for fewer chips)."""
    from trnsim.fabric import collective
    collective("trn2.48xlarge", "all-reduce", 4096, instances=2)  # imports and first-use setup, not timed
    out = []
    for units in SPEED_LADDER:
        _cold()
        t = time.perf_counter()
        res = collective("trn2.48xlarge", "all-reduce", 1 * GiB, instances=units)
        out.append(dict(system=f"{units} x trn2.48xlarge", chips=res.chips, ranks=res.ranks,
                        wall_s=time.perf_counter() - t, algorithm=res.algorithm, time_us=res.time_us,
                        busbw_gbps=res.busbw_gbps, hierarchical=res.hierarchical, folded=res.folded,
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


GPU_CASES = [("p5.48xlarge", 1, 8), ("p5.48xlarge", 2, 16), ("p5en.48xlarge", 1, 8), ("p6-b200.48xlarge", 1, 8),
             ("gb300-nvl72", 1, 72)]
GPU_SIZES = (16 * 1024, 2 ** 20, 64 * 2 ** 20, GiB)


def gpu_all_reduce():
    """NCCL's cost model (fabric.toml [nccl.*]) on the GPU systems: all-reduce time and the algorithm/protocol
    it picks per size (the 16 KiB decode all-reduce over 8 H100s is the issue's case: order 10-20 us)."""
    from trnsim.fabric import collective
    out = []
    for system, inst, n in GPU_CASES:
        for size in GPU_SIZES:
            r = collective(system, "all-reduce", size, ranks=n, instances=inst)
            out.append(dict(system=f"{inst} x {system}" if inst > 1 else system, ranks=n, size_bytes=size,
                            time_us=r.time_us, busbw_gbps=r.busbw_gbps, algorithm=r.algorithm,
                            links=r.busiest_link))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--calibration", action="store_true", help="only the calibration rows (fast)")
    args = ap.parse_args(argv)
    cal = predicted_vs_published()
    med = medians(cal)
    if args.calibration:
        if args.json:
            print(json.dumps(dict(calibration=cal, medians=med), indent=2))
            return 0
    sp = fp = vs = gp = None
    if not args.calibration:
        sp = speed()
        fp = fast_path()
        vs = versus_placeholder()
        gp = gpu_all_reduce()
    if args.json:
        print(json.dumps(dict(calibration=cal, medians=med, speed=sp, fast_path=fp, versus_placeholder=vs,
                              gpu_all_reduce=gp), indent=2))
        return 0
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
    t = Table(title="Calibration rows: predicted vs published (busbw rows of the trn1 guide and the EFA latency "
                    "rows shown, not scored)",
              title_justify="left")
    for c in ("row", "group", "op", "ranks", "size", "metric", "published", "predicted", "|error|", "before",
              "|error| before", "algorithm", "role"):
        t.add_column(c)
    for r in cal:
        t.add_row(r["id"], r["group"], r["op"], str(r["ranks"]), f"{r['size_bytes']:.0f}", r["metric"],
                  f"{r['published']:g}", f"{r['predicted']:.4g}", f"{abs(r['error_pct']):.0f}%",
                  "-" if r["before"] is None else f"{r['before']:.4g}",
                  "-" if r["before_error_pct"] is None else f"{abs(r['before_error_pct']):.0f}%", r["algorithm"],
                  r["role"] if r["scored"] else "-")
    con.print(t)
    t = Table(title="Median |error| per generation (goals: trn1 <= 15 %, trn2 <= 20 %)", title_justify="left")
    for c in ("group", "rows", "median |error| now", "before", "held-out rows", "held-out median now"):
        t.add_column(c)
    for g, m in med.items():
        t.add_row(g, str(m["rows"]), f"{m['median_abs_error_pct']:.1f}%",
                  "-" if m["before_median_abs_error_pct"] is None else f"{m['before_median_abs_error_pct']:.1f}%",
                  str(m["held_out_rows"]),
                  "-" if m["held_out_median_abs_error_pct"] is None else f"{m['held_out_median_abs_error_pct']:.1f}%")
    con.print(t)
    if args.calibration:
        return 0
    t = Table(title="Simulation speed: all-reduce 1 GiB, cold memos (targets: 1,024 chips < 0.5 s, "
                    "1M chips < 1 s, never slower for fewer chips)", title_justify="left")
    for c in ("system", "chips", "ranks", "wall s", "algorithm", "time us", "busbw GB/s", "folded"):
        t.add_column(c)
    for r in sp:
        t.add_row(r["system"], str(r["chips"]), str(r["ranks"]), f"{r['wall_s']:.3f}", r["algorithm"],
                  f"{r['time_us']:.0f}", f"{r['busbw_gbps']:.1f}", "yes" if r["folded"] else "-")
    con.print(t)
    walls = [r["wall_s"] for r in sp]
    con.print(f"largest wall time at fewer chips than 1M: {max(walls[:-1]):.3f} s; at 1M chips: {walls[-1]:.3f} s")
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
    t = Table(title="GPU all-reduce, NCCL's cost model (NVIDIA/nccl src/graph/tuning.cc tables, fabric.toml "
                    "\\[nccl.*])", title_justify="left")
    for c in ("system", "ranks", "size", "time us", "busbw GB/s", "algorithm/protocol", "links"):
        t.add_column(c)
    for r in gp:
        t.add_row(r["system"], str(r["ranks"]), f"{r['size_bytes']:.0f}", f"{r['time_us']:.1f}",
                  f"{r['busbw_gbps']:.1f}", r["algorithm"], r["links"])
    con.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
