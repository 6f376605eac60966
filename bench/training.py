"""Every training row of the calibration set: predicted vs published step time, |error|, median, refusals.

    python bench/training.py            # the recorded figures (frameworks.toml, efficiency data)
    python bench/training.py --before   # the estimator as it was: full fine-tuning for LoRA rows, no framework
                                        # layouts (ZeRO-1 over dp, fp32 grads, 1 GiB / 4 GiB reserve), no fixed cost
    python bench/training.py --fit      # fit the fixed per-step cost of optimum-neuron on trn2 (rows P001, P005,
                                        # P006), with leave-one-out checks; prints, does not write
    python bench/training.py --json

Rows and how each is run: trnsim/model/data/training_rows.toml.
"""
import argparse
import json
import math
import statistics
import sys
import time

from trnsim.model.datafiles import load

GROUPS = (("trn2 LoRA", lambda r: r["system"].startswith("trn2")),
          ("trn1", lambda r: r["system"].startswith("trn1")),
          ("H100/B200", lambda r: not r["system"].startswith("trn")))


def rows():
    """Row id -> spec (training_rows.toml)."""
    return dict(load("training_rows"))


def _estimate(spec, before: bool, overrides=None):
    """The estimate of one row (or the ConfigError that refused it)."""
    args = dict(spec["args"])
    system, nodes = spec["system"], int(spec.get("nodes", 1))
    if before:
        for k in ("framework", "lora_rank", "lora_targets"):
            args.pop(k, None)
        # the best the old estimator offered: ZeRO-1 over dp, sequence parallel with TP, selective recompute
        args.setdefault("zero", 1)
        args.setdefault("sp", args.get("tp", 1) > 1)
        args.setdefault("recompute", "selective")
        if args.get("zero", 0) > 1:
            args["zero"] = 1
    if system.startswith("trn"):
        from trnsim.model import estimate_training
        return estimate_training(spec["model"], system, nodes=nodes, overrides=overrides, **args)
    return _gpu_estimate(spec["model"], system, nodes, args, before, overrides)


def _gpu_estimate(model, system, nodes, args, before, overrides):
    """GPU rows through the GPU training estimator."""
    from trnsim.model import estimate_training
    try:
        return estimate_training(model, system, nodes=nodes, overrides=overrides, **args)
    except TypeError:
        raise
    except Exception as e:   # systems the one estimator does not know yet go through the GPU twin
        if "unknown instance" not in str(e):
            raise
    from trnsim.model.gpu.estimate import estimate_gpu_training
    a = {k: v for k, v in args.items() if k not in ("framework", "lora_rank", "lora_targets", "lnc")}
    if a.get("zero", 0) > 1:
        a["zero"] = 1
    for k, v in (("zero", 1), ("sp", a.get("tp", 1) > 1), ("recompute", "selective")):
        a.setdefault(k, v)
    return estimate_gpu_training(model, system, nodes=nodes, **a)


def predict(rid, spec, before=False, overrides=None):
    """{row, group, published, predicted, error, refused}: step seconds (an MFU row: as a step time)."""
    from trnsim.errors import TrnsimError
    group = next(g for g, test in GROUPS if test(spec))
    out = {"row": rid, "group": group, "system": spec["system"], "model": spec["model"], "why": spec["why"]}
    t0 = time.perf_counter()
    try:
        e = _estimate(spec, before, overrides)
    except TrnsimError as err:
        out.update(published=spec.get("step_s"), predicted=None, error=None, refused=str(err).splitlines()[0])
        return out
    if "mfu" in spec:   # the row publishes MFU: compare step times at the estimator's own FLOP count
        pub = e.step_time_s * e.mfu / spec["mfu"]
    else:
        pub = spec["step_s"]
    out.update(published=pub, predicted=e.step_time_s, error=e.step_time_s / pub - 1.0, refused=None,
               memory_gib=e.memory_per_core_gib, fixed_s=e.breakdown.get("fixed_step", 0.0),
               seconds=time.perf_counter() - t0)
    return out


def summary(results):
    """Per group: rows, refused, median |error|."""
    out = {}
    for g, _ in GROUPS:
        rs = [r for r in results if r["group"] == g]
        errs = [abs(r["error"]) for r in rs if r["error"] is not None]
        out[g] = {"rows": len(rs), "refused": sum(1 for r in rs if r["refused"]),
                  "median_abs_error": statistics.median(errs) if errs else None}
    return out


def fit_fixed(ids=("P001", "P005", "P006"), key="optimum-neuron.fixed_step_s.trn2"):
    """The fixed per-step cost minimising the squared log step error over ``ids`` (golden section on
    [0, 10] s); each row held out in turn."""
    specs = rows()
    base = {i: predict(i, specs[i], overrides={key: 0.0}) for i in ids}

    def best(use):
        def loss(f):
            return sum(math.log((base[i]["predicted"] + f) / base[i]["published"]) ** 2 for i in use)
        a, b = 0.0, 10.0
        for _ in range(80):
            c, d = a + (b - a) * 0.382, a + (b - a) * 0.618
            a, b = (a, d) if loss(c) <= loss(d) else (c, b)
        return (a + b) / 2
    f_all = best(ids)
    loo = {}
    for held in ids:
        f = best([i for i in ids if i != held])
        loo[held] = {"fixed_s": f, "error": (base[held]["predicted"] + f) / base[held]["published"] - 1.0}
    return {"key": key, "rows": list(ids), "fixed_s": f_all,
            "errors": {i: (base[i]["predicted"] + f_all) / base[i]["published"] - 1.0 for i in ids},
            "compute_only_s": {i: base[i]["predicted"] for i in ids}, "leave_one_out": loo}


def _order(results):
    """trn2 LoRA: tokens/s rises from seq 2048 to 4096 in the rows; does it in the estimate?"""
    specs = rows()
    by = {r["row"]: r for r in results}
    if not all(i in by and by[i]["predicted"] for i in ("P001", "P006")):
        return None
    tok = lambda i, k: specs[i]["args"]["seq"] * specs[i]["args"]["global_batch"] / by[i][k]  # noqa: E731
    return {"published_tokens_per_s": [tok("P001", "published"), tok("P006", "published")],
            "predicted_tokens_per_s": [tok("P001", "predicted"), tok("P006", "predicted")],
            "ordered_right": (tok("P006", "predicted") > tok("P001", "predicted"))
            == (tok("P006", "published") > tok("P001", "published"))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", action="store_true", help="the estimator without LoRA / framework layouts / fixed cost")
    ap.add_argument("--fit", action="store_true", help="fit the trn2 optimum-neuron fixed step cost (prints only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = [predict(i, s, args.before) for i, s in rows().items()]
    out = {"before": args.before, "rows": results, "summary": summary(results), "order": _order(results)}
    if args.fit:
        out["fit"] = fit_fixed()
    out["wall_s"] = time.perf_counter() - t0
    if args.json:
        json.dump(out, sys.stdout, indent=2, default=str)
        print()
        return 0
    from rich.table import Table
    from trnsim.cli.output import console
    con = console()
    t = Table(title="Training rows: step time predicted vs published" + (" (before)" if args.before else ""),
              title_justify="left")
    for c in ("row", "group", "system", "model", "published s", "predicted s", "error", "fixed s", "GiB/core", "note"):
        t.add_column(c)
    for r in results:
        if r["refused"]:
            t.add_row(r["row"], r["group"], r["system"], r["model"], f"{r['published'] or 0:.2f}", "refused", "", "", "",
                      r["refused"][:110])
        else:
            t.add_row(r["row"], r["group"], r["system"], r["model"], f"{r['published']:.3f}", f"{r['predicted']:.3f}",
                      f"{r['error']:+.1%}", f"{r['fixed_s']:.2f}", f"{r['memory_gib']:.1f}", "")
    con.print(t)
    for g, s in out["summary"].items():
        med = "n/a" if s["median_abs_error"] is None else f"{s['median_abs_error']:.1%}"
        con.print(f"{g}: {s['rows']} rows, {s['refused']} refused, median |error| {med}")
    if out["order"]:
        o = out["order"]
        con.print("trn2 LoRA tokens/s seq 2048 -> 4096: published {:.0f} -> {:.0f}, predicted {:.0f} -> {:.0f}: {}".format(
            *o["published_tokens_per_s"], *o["predicted_tokens_per_s"],
            "ordered right" if o["ordered_right"] else "ORDER WRONG"))
    if args.fit:
        f = out["fit"]
        con.print(f"fit {f['key']} on {', '.join(f['rows'])}: {f['fixed_s']:.3f} s; errors "
                  + ", ".join(f"{i} {e:+.1%}" for i, e in f["errors"].items()))
        for i, v in f["leave_one_out"].items():
            con.print(f"  held out {i}: fixed {v['fixed_s']:.3f} s from the others predicts it {v['error']:+.1%}")
    con.print(f"wall time {out['wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
