"""Every calibration row of the model estimator: predicted vs published, the error, time per estimate.

    python bench/models.py              # the recorded calibration (data/calibration.toml)
    python bench/models.py --refit      # fit the factors again first (does not write them)
    python bench/models.py --uncalibrated   # every factor 1: the raw roofline gap
    python bench/models.py --breakdown      # each row in parts: compute, weights, KV, collectives per kind, fixed
    python bench/models.py --costs simulated --refit --write   # fit the simulated op costs' factors and record them
    python -m trnsim.model.calibrate --write   # roofline factors jointly with trn1's in-graph fabric constants

--refit fits the factors only, the fabric constants as fabric.toml holds them.

Also times a few typical estimates (warm), the `< 0.5 s` target of issue 9, and a planner-like sweep of
training estimates per collectives model (fabric closed forms built cold for every new group).
"""
import argparse
import time

from trnsim.cli.output import console
from rich.table import Table

from trnsim.model import estimate_inference, estimate_training
from trnsim.model.calibrate import evaluate, fit, runs

TYPICAL = [
    ("train llama-3.1-8b 32 x trn1.32xlarge tp32 dp32 zero1 seq8192",
     lambda: estimate_training("llama-3.1-8b", "trn1.32xlarge", nodes=32, tp=32, dp=32, zero=1, seq=8192,
                               global_batch=1024)),
    ("train llama-3.1-70b 16 x trn2.48xlarge tp32 pp4 vp2 sp zero1",
     lambda: estimate_training("llama-3.1-70b", "trn2.48xlarge", nodes=16, lnc=2, tp=32, pp=4, vp=2, sp=True,
                               zero=1, seq=8192, global_batch=512, recompute="selective")),
    ("train deepseek-v3 8 x trn2-ultraserver tp8 ep64 zero1 full recompute",
     lambda: estimate_training("deepseek-v3", "trn2-ultraserver", nodes=8, lnc=2, tp=8, ep=64, zero=1,
                               seq=4096, global_batch=2048, recompute="full", check_memory=False)),
    ("infer llama-3-70b trn2.48xlarge tp64 lnc2 b4 2048/2048",
     lambda: estimate_inference("llama-3-70b", "trn2.48xlarge", tp=64, lnc=2, batch=4, input_len=2048,
                                output_len=2048)),
    ("infer + serving llama-3-70b rate 2/s, 200 requests",
     lambda: estimate_inference("llama-3-70b", "trn2.48xlarge", tp=64, lnc=2, batch=4, input_len=2048,
                                output_len=2048, rate=2.0)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", action="store_true", help="fit the efficiency factors first (not written)")
    ap.add_argument("--uncalibrated", action="store_true", help="all efficiency factors 1, no overhead")
    ap.add_argument("--costs", choices=("roofline", "simulated"), default="roofline",
                    help="per-op costs: catalog roofline or simulated reference kernels (trnsim.kernels)")
    ap.add_argument("--write", action="store_true", help="with --refit: record the factors in calibration.toml")
    ap.add_argument("--breakdown", action="store_true",
                    help="print each row's estimate broken down (compute, weights, KV, collectives per kind, fixed)")
    args = ap.parse_args()
    factory = None
    if args.costs == "simulated":
        from trnsim.kernels import time_reference
        from trnsim.model.opcost import SimulatedOpCosts
        sim = SimulatedOpCosts("trn1", timer=time_reference, lnc=1)   # every calibration row is trn1
        factory = lambda: sim  # noqa: E731
    out = console()
    eff = None
    if args.uncalibrated:
        eff = dict(compute=1.0, memory=1.0, vector=1.0)
    elif args.refit:
        t = time.perf_counter()
        eff = fit(factory)
        out.print(f"refit in {time.perf_counter() - t:.1f} s: " +
                  ", ".join(f"{k}={v:.4g}" for k, v in eff.items()))
    res = evaluate(eff, factory() if factory else None)
    if args.refit and args.write:
        from trnsim.model.calibrate import write
        out.print("wrote", write(eff, res, "trn1", args.costs))
    tab = Table(title=f"Calibration rows (models.csv): predicted vs published ({args.costs} op costs)",
                title_justify="left")
    for c in ("row", "model", "kind", "metric", "published", "predicted", "error", "ms / estimate"):
        tab.add_column(c)
    for r in res:
        tab.add_row(r.id, r.model, r.kind, r.metric, f"{r.published:.4g}", f"{r.predicted:.4g}",
                    f"{r.error:+.1%}", f"{r.seconds * 1e3:.1f}")
    out.print(tab)
    for r in res:
        out.print(f"  {r.id}: {runs()[r.id]['why']}")
    if args.breakdown:
        breakdown(out, eff, factory() if factory else None)
    tab = Table(title="Time per estimate (warm, roofline op costs, fabric collectives)", title_justify="left")
    tab.add_column("estimate")
    tab.add_column("ms")
    for label, fn in TYPICAL:
        fn()
        t = time.perf_counter()
        fn()
        tab.add_row(label, f"{(time.perf_counter() - t) * 1e3:.1f}")
    out.print(tab)
    tab = Table(title="Planner-like sweep: llama-3.1-8b on 1-8 x trn2.48xlarge, every tp x pp x zero "
                      "(one process, caches of new groups cold)", title_justify="left")
    for c in ("collectives", "estimates", "CPU s", "estimates / CPU s", "distinct (op, group)"):
        tab.add_column(c)
    for comm in ("fabric", "fabric-sim"):
        n, secs, groups = sweep(comm)
        tab.add_row(comm, str(n), f"{secs:.2f}", f"{n / secs:.0f}", str(groups))
    out.print(tab)


def breakdown(out, eff, costs) -> None:
    """Each calibration row's estimate in parts: the step's compute, memory and fixed costs (ms or s), and
    every collective kind with its calls, total and time per call."""
    from trnsim.model.calibrate import runs
    for rid, run in sorted(runs().items()):
        kw = dict(run["args"])
        fn = estimate_training if run["kind"] == "train" else estimate_inference
        e = fn(run["model"], run["instance"], check_memory=False, efficiency=eff, costs=costs, **kw)
        if run["kind"] == "train":
            parts, tally, unit = e.breakdown, e.collectives, "s per step"
        else:
            phase = "prefill" if run["kind"] == "ttft" else "decode"
            parts = {k: v for k, v in e.breakdown.items() if k.startswith(phase)}
            tally, unit = e.collectives[phase], "ms"
        out.print(f"{rid} {run['model']} {run['metric']} ({unit}): " +
                  ", ".join(f"{k} {v:.4g}" for k, v in parts.items()))
        for op, d in tally.items():
            out.print(f"    {op}: {d['calls']} calls, {d['seconds'] * 1e3:.4g} ms, "
                      f"{d['seconds'] / d['calls'] * 1e6:.1f} us per call, {d['bytes'] / d['calls'] / 1024:.0f} KiB per call")


def sweep(comm: str):
    """(estimates, CPU seconds, distinct (op, group) closed forms built) of a tp x pp x dp x zero sweep (CPU
    time, not wall: the bench machine is shared)."""
    from trnsim.fabric import closed_form, fast
    from trnsim.errors import TrnsimError
    fast.candidates.cache_clear()   # every group new, as in a fresh planner worker
    closed_form._STEP_MEMO.clear()
    n, t = 0, time.process_time()
    for nodes in (1, 2, 4, 8):
        for tp in (1, 2, 4, 8, 16, 32, 64):
            for pp in (1, 2, 4, 8):
                if (64 * nodes) % (tp * pp):
                    continue
                for zero in (0, 1):
                    try:
                        estimate_training("llama-3.1-8b", "trn2.48xlarge", nodes=nodes, lnc=2, tp=tp, pp=pp,
                                          dp=64 * nodes // (tp * pp), zero=zero, seq=4096, global_batch=1024,
                                          check_memory=False, comm=comm)
                        n += 1
                    except TrnsimError:   # layouts the model rejects (batch, heads)
                        pass
    return n, time.process_time() - t, fast.candidates.cache_info().currsize


if __name__ == "__main__":
    main()
