"""Every training row of the calibration set: predicted vs published step time, |error|, median, refusals.

    python bench/training.py            # the recorded figures (train_frameworks.toml, efficiency data)
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
import os
import statistics
import sys
import time

from trnsim.model.datafiles import load

BEFORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "training_before.json")
GROUPS = (("trn2 LoRA", lambda r: r["system"].startswith("trn2")),
          ("trn1", lambda r: r["system"].startswith("trn1")),
          ("H100/B200", lambda r: not r["system"].startswith("trn")))


def rows():
    """Row id -> spec (training_rows.toml)."""
    return dict(load("training_rows"))


def _estimate(spec, overrides=None, efficiency=None):
    """The estimate of one row (or the ConfigError that refused it)."""
    from trnsim.model import estimate_training
    return estimate_training(spec["model"], spec["system"], nodes=int(spec.get("nodes", 1)), overrides=overrides,
                             efficiency=efficiency, **spec["args"])


def predict(rid, spec, overrides=None, efficiency=None):
    """{row, group, published, predicted, error, refused}: step seconds (an MFU row: as a step time)."""
    from trnsim.errors import TrnsimError
    group = next(g for g, test in GROUPS if test(spec))
    out = {"row": rid, "group": group, "system": spec["system"], "model": spec["model"], "why": spec["why"]}
    t0 = time.perf_counter()
    try:
        e = _estimate(spec, overrides, efficiency)
    except TrnsimError as err:
        # a layout rule or memory fit refuses the row; a system missing from the catalog is not a refusal
        refused = getattr(err, "rule", "") in ("memory-fit",) or getattr(err, "rule", "").startswith("parallel")
        out.update(published=spec.get("step_s"), predicted=None, error=None,
                   refused=str(err).splitlines()[0] if refused else None,
                   unavailable=None if refused else str(err).splitlines()[0])
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
                  "unavailable": sum(1 for r in rs if r.get("unavailable")),
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


def fit_matmul(gpu, ids, held):
    """The training matmul efficiency of one GPU generation at fp8 (achieved / dense fp8 peak, the factor the
    op costs use) minimising the squared log step error over ``ids``; errors of every id and of ``held``."""
    specs = rows()

    def step(i, eff):
        return predict(i, specs[i], efficiency={"matmul": eff})["predicted"]

    def loss(eff, use):
        return sum(math.log(step(i, eff) / specs[i]["step_s"]) ** 2 for i in use)

    def best(use):
        a, b = 0.2, 1.0
        for _ in range(40):
            c, d = a + (b - a) * 0.382, a + (b - a) * 0.618
            a, b = (a, d) if loss(c, use) <= loss(d, use) else (c, b)
        return (a + b) / 2
    eff = best(ids)
    from trnsim.model.gpu.efficiency import estimator_figures, load_efficiency
    lumped = load_efficiency(gpu).matmul["fp8"]
    figs = estimator_figures()
    out = {"gpu": gpu, "rows": list(ids), "matmul_fp8": eff, "file_value": eff / lumped,
           "file_now": figs.get(f"training_fp8_scale_by_gpu.{gpu}", figs["training.matmul_fp8_scale"]),
           "errors": {i: step(i, eff) / specs[i]["step_s"] - 1.0 for i in list(ids) + list(held)}}
    if len(ids) > 1:
        out["leave_one_out"] = {h: step(h, best([i for i in ids if i != h])) / specs[h]["step_s"] - 1.0 for h in ids}
    return out


def fit_bf16_scale(ids=("P294", "P301"), held=("P297", "P298")):
    """The bf16 training scale (matmul and attention = efficiency.toml's lumped bf16 x scale) minimising the
    squared log step error over ``ids`` at the rows' published layouts; errors of ``ids`` and ``held``."""
    from trnsim.model.gpu.efficiency import estimator_figures, load_efficiency
    specs = rows()
    lumped = load_efficiency("h100-sxm").matmul["bf16"]

    def step(i, sc):
        eff = min(1.0, lumped * sc)
        return predict(i, specs[i], efficiency={"matmul": eff, "attention": eff})["predicted"]

    def loss(sc, use):
        return sum(math.log(step(i, sc) / specs[i]["step_s"]) ** 2 for i in use)
    a, b = 0.8, 1.9
    for _ in range(40):
        c, d = a + (b - a) * 0.382, a + (b - a) * 0.618
        a, b = (a, d) if loss(c, ids) <= loss(d, ids) else (c, b)
    sc = (a + b) / 2
    return {"rows": list(ids), "scale": sc, "recorded": estimator_figures()["training.matmul_bf16_scale"],
            "errors": {i: step(i, sc) / specs[i]["step_s"] - 1.0 for i in list(ids) + list(held)}}


def load_before():
    """The stored 'before' rows (a missing system, which the stored run counted as refused, is 'unavailable')."""
    with open(BEFORE) as fh:
        results = json.load(fh)["rows"]
    for r in results:
        if r["refused"] and "memory-fit" not in r["refused"] and "parallel" not in r["refused"]:
            r["unavailable"], r["refused"] = r["refused"], None
    return results


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
    ap.add_argument("--fit-gpu", action="store_true", help="fit the fp8 matmul factor per GPU generation (prints only)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.before:
        results = load_before()
    else:
        results = [predict(i, s) for i, s in rows().items()]
    out = {"before": args.before, "rows": results, "summary": summary(results), "order": _order(results)}
    if args.fit:
        out["fit"] = fit_fixed()
    if args.fit_gpu:
        out["fit_bf16"] = fit_bf16_scale()
        out["fit_gpu"] = [fit_matmul("h100-sxm", ("P305", "P316"), ("P306", "P308", "P312", "P313", "P315")),
                          fit_matmul("b200", ("P310",), ())]
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
    before = {r["row"]: r for r in load_before()}

    def was(rid):
        b = before.get(rid)
        if b is None:
            return ""
        return "refused" if b.get("refused") else (
            "n/a" if b.get("predicted") is None else f"{b['error']:+.1%}")
    for c in ("row", "group", "system", "model", "published s", "predicted s", "error", "before", "fixed s",
              "GiB/core", "note"):
        t.add_column(c)
    for r in results:
        if r["refused"] or r.get("unavailable"):
            t.add_row(r["row"], r["group"], r["system"], r["model"], f"{r['published'] or 0:.2f}",
                      "refused" if r["refused"] else "n/a", "", was(r["row"]), "", "",
                      (r["refused"] or r["unavailable"])[:110])
        else:
            t.add_row(r["row"], r["group"], r["system"], r["model"], f"{r['published']:.3f}", f"{r['predicted']:.3f}",
                      f"{r['error']:+.1%}", was(r["row"]), f"{r['fixed_s']:.2f}", f"{r['memory_gib']:.1f}", "")
    con.print(t)
    if not args.before:
        for g, s in summary(list(before.values())).items():
            med = "n/a" if s["median_abs_error"] is None else f"{s['median_abs_error']:.1%}"
            con.print(f"before: {g}: {s['rows']} rows, {s['refused']} refused, median |error| {med} (of the rows "
                      "estimated)")
    for g, s in out["summary"].items():
        med = "n/a" if s["median_abs_error"] is None else f"{s['median_abs_error']:.1%}"
        con.print(f"{g}: {s['rows']} rows, {s['refused']} refused, {s['unavailable']} without a system in the "
                  f"catalog, median |error| {med}")
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
    if "fit_bf16" in out:
        f = out["fit_bf16"]
        con.print(f"fit bf16 scale on {', '.join(f['rows'])}: {f['scale']:.4f} (recorded {f['recorded']:.4f}); errors "
                  + ", ".join(f"{i} {e:+.1%}" for i, e in f["errors"].items()))
    for f in out.get("fit_gpu", []):
        con.print(f"fit {f['gpu']} fp8 matmul efficiency on {', '.join(f['rows'])}: {f['matmul_fp8']:.4f} "
                  f"(scale over efficiency.toml's lumped fp8 {f['file_value']:.4f}; recorded {f['file_now']:.4f}); errors "
                  + ", ".join(f"{i} {e:+.1%}" for i, e in f["errors"].items()))
        for i, e in f.get("leave_one_out", {}).items():
            con.print(f"  held out {i}: fitted on the other row it is predicted {e:+.1%}")
    con.print(f"wall time {out['wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
