"""Every trn2/trn3 serving calibration row: predicted vs published, |error|, and per generation the median
|error| and the bias (median signed error), on the fitted rows and on the held-out rows.

    python bench/serving.py              # the recorded constants (data files)
    python bench/serving.py --refit      # fit each generation's constants first (not written)
    python bench/serving.py --refit --write   # ... and record them with the row ids
    PYTHONPATH=<older checkout> python bench/serving.py --closed-form   # an older estimator on the same rows

--closed-form runs each row with only the arguments every trnsim version has (tp, ep, lnc, batch = users,
input, output) and derives the serving figures by hand: a user's request takes TTFT + (output - 1) TPOT,
N users make N x output tokens per request time. Rows whose model the version cannot load count as refused.
"""
import argparse
import os
import statistics
import time

from rich.table import Table

from trnsim.cli.output import console

ROWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trnsim", "model", "data")


def closed_form(out):
    """Every run predicted by the basic estimate_inference of whichever trnsim is on the path."""
    import csv
    import re
    import tomllib
    from trnsim.errors import TrnsimError
    from trnsim.model import estimate_inference
    with open(os.path.join(ROWS, "serving_runs.toml"), "rb") as f:
        runs_ = tomllib.load(f)
    with open(os.path.join(ROWS, "serving_rows.csv"), newline="") as f:
        rows_ = {r["id"]: r for r in csv.DictReader(f)}
    res = []
    for rid, run in runs_.items():
        base = rid[:-1] if rid.endswith("b") else rid
        nums = [float(x.replace(",", "")) for x in re.findall(r"[\d,]*\.?\d+", rows_[base]["value"])]
        pub = float(run.get("published", nums[1] if rid.endswith("b") else nums[0]))
        a = run["args"]
        users = a.get("concurrency", a.get("batch", 1))
        try:
            e = estimate_inference(run["model"], run["instance"], tp=a["tp"], ep=a.get("ep", 1), lnc=a["lnc"],
                                   batch=users, input_len=a["input_len"], output_len=a["output_len"],
                                   check_memory=False)
        except TrnsimError as err:
            res.append((rid, rows_[base]["generation"], run["metric"], pub, None, str(err)[:60]))
            continue
        o = a["output_len"]
        req = e.ttft_ms / 1e3 + (o - 1) * e.tpot_ms / 1e3
        m = run["metric"]
        val = {"ttft_ms": e.ttft_ms, "tpot_ms": e.tpot_ms, "output_tokens_per_s": e.output_tokens_per_s,
               "serving.ttft_ms_p50": e.ttft_ms, "serving.itl_ms_p50": e.tpot_ms, "serving.tpot_ms_p50": e.tpot_ms,
               "serving.output_tokens_per_s": users * o / req, "serving.latency_s_p50": req,
               "breakdown.decode_compute_ms": e.breakdown["decode_compute_ms"],
               "breakdown.decode_comm_ms": e.breakdown["decode_comm_ms"]}[m]
        res.append((rid, rows_[base]["generation"], m, pub, val, ""))
    tab = Table(title="serving rows, closed form of the estimator on the path", title_justify="left")
    for c in ("row", "gen", "metric", "published", "predicted", "error"):
        tab.add_column(c)
    for rid, gen, m, pub, val, why in res:
        tab.add_row(rid, gen, m, f"{pub:.4g}", "refused" if val is None else f"{val:.4g}",
                    why if val is None else f"{val / pub - 1:+.1%}")
    out.print(tab)
    for gen in ("trn2", "trn3"):
        ok = [(v / p - 1) for _, g, _, p, v, _ in res if g == gen and v is not None]
        n = sum(1 for r in res if r[1] == gen)
        out.print(f"{gen}: {len(ok)} of {n} rows run; median |error| {statistics.median(abs(x) for x in ok):.1%}, "
                  f"bias {statistics.median(ok):+.1%}")


def summary(res, gen, holdout=None):  # noqa: D401
    """(rows, median |error|, bias) of one generation's rows (optionally only held-out / fitted ones)."""
    sel = [r for r in res if r.generation == gen and (holdout is None or r.holdout == holdout)]
    if not sel:
        return 0, float("nan"), float("nan")
    return (len(sel), statistics.median(abs(r.error) for r in sel), statistics.median(r.error for r in sel))


# (what the pair shows, row a, row b): published a < b; the estimate must order them the same way
ORDERINGS = (
    ("batch: DeepSeek-V3 throughput b1 < b2", "P038", "P040"),
    ("batch: DeepSeek-V3 throughput b2 < b4", "P040", "P042"),
    ("batch: Trinity-Nano TTFT b2 < b4 (TP4)", "P067", "P070"),
    ("batch: Trinity-Large throughput b2 < b4", "P090", "P093"),
    ("prompt length: Qwen3-30B throughput 512/256 < 2048/512 (trn3)", "P166", "P169"),
    ("concurrency: Qwen3-30B ITL 1 user < 32 users (trn3)", "P168", "P180"),
    ("concurrency: Qwen3-30B TTFT 1 user < 16 users (trn3)", "P167", "P176"),
    ("concurrency: Qwen3-30B throughput 1 < 4 users (trn3)", "P166", "P172"),
    ("TP degree: Trinity-Nano TKG TP4 < TP2 (b1)", "P065", "P056"),
    ("TP degree: Trinity-Nano TTFT TP4 < TP2 (b4)", "P070", "P061"),
    ("dense vs MoE: Llama-3.1-8B TTFT < gpt-oss-120b TTFT (512 tokens)", "P016", "P023"),
    ("dense vs MoE: Llama-3.1-8B ITL < Qwen3-235B ITL (optimum-neuron, 1 user)", "P107", "P131"),
    ("speculation: 4 < 6 EAGLE tokens, throughput (trn3)", "P161", "P162"),
    ("model size: Qwen3.5 2B < 9B < 27B TPOT", "P102b", "P100b"),
    ("model size: Qwen3.5 9B < 27B TPOT", "P100b", "P101b"),
)


def orderings(out, res):
    """Each published ordering and whether the estimate keeps it."""
    by = {r.id: r for r in res}
    tab = Table(title="Orderings (published a < b)", title_justify="left")
    for c in ("what", "a", "b", "published", "predicted", "kept"):
        tab.add_column(c)
    kept = 0
    for what, a, b in ORDERINGS:
        ra, rb = by[a], by[b]
        ok = (ra.predicted < rb.predicted) == (ra.published < rb.published)
        kept += ok
        tab.add_row(what, a, b, f"{ra.published:.4g} < {rb.published:.4g}", f"{ra.predicted:.4g} vs {rb.predicted:.4g}",
                    "yes" if ok else "NO")
    out.print(tab)
    out.print(f"orderings kept: {kept} of {len(ORDERINGS)}")


CLAIM_MODELS = ("gpt-oss-120b", "llama-3.3-70b", "qwen3-30b-a3b")
CLAIM_SYSTEMS = (("trn2", "trn2.48xlarge", (8, 16, 32, 64)), ("trn3", "trn3-gen1-ultraserver", (4, 8, 16, 32)))


def best_per_mw(model, instance, tps, tpot_ms, like=None):
    """(output tokens/s per MW, tp, batch, TPOT ms) of the best decode layout whose TPOT stays within the
    bound: batch doubling per tp, chips = tp logical cores at LNC=2, chip watts from cost/data/power.toml."""
    from trnsim.cost.power import load_power_model
    from trnsim.errors import TrnsimError
    from trnsim.model import estimate_inference
    from trnsim.model.neuron import ServingSetup
    from trnsim.model.parallel import make_system
    from trnsim.model.serving_calibrate import current
    eff, setup = None, None
    if like:   # run with another generation's software constants: the hardware ratio alone
        c = current(like)
        target = make_system(instance, 1, 2).target
        eff = {k: c[k] for k in ("compute", "memory", "vector", "expert")}
        setup = ServingSetup(overrides={f"runtime.{target}.{k}": c[k] for k in
                                        ("op_fixed_s", "step_overhead_s", "prefill_fixed_s", "moe_block_fixed_s",
                                         "moe_block_tokens")})
    best = (0.0, 0, 0, 0.0)
    for tp in tps:
        for b in (1, 2, 4, 8, 16, 32, 64, 128):
            try:
                e = estimate_inference(model, instance, tp=tp, lnc=2, batch=b, input_len=1024, output_len=512,
                                       efficiency=eff, serving=setup)
            except TrnsimError:
                continue
            if e.tpot_ms > tpot_ms:
                break
            sysm = make_system(instance, 1, 2)
            chips = tp / (sysm.chip.cores / 2)
            per_mw = e.output_tokens_per_s / (chips * load_power_model().chip_watts[sysm.target]) * 1e6
            if per_mw > best[0]:
                best = (per_mw, tp, b, e.tpot_ms)
    return best


def claims(out, tpot_ms):
    """Trn3 UltraServer vs Trn2: output tokens per megawatt (chip power) at TPOT <= ``tpot_ms``, with each
    generation's own fitted constants and with trn3 run on trn2's (the hardware alone)."""
    for like in (None, "trn2"):
        claims_table(out, tpot_ms, like)
    out.print("published claim (reference/economics.md S2, S3): over 5x output tokens per megawatt for Trn3 "
              "UltraServers vs Trn2 at similar latency per user")


def claims_table(out, tpot_ms, like):
    """One table of the claim check (``like``: the generation whose constants trn3 borrows)."""
    how = "each generation's own constants" if like is None else f"trn3 with {like}'s software constants"
    tab = Table(title=f"Output tokens per MW (chip power) at TPOT <= {tpot_ms:g} ms, 1024 in / 512 out, bf16 "
                      f"(MXFP4 experts where the chip has MX); {how}", title_justify="left")
    for c in ("model", "trn2 tok/s/MW", "(tp, batch, TPOT)", "trn3 tok/s/MW", "(tp, batch, TPOT)", "trn3 / trn2"):
        tab.add_column(c)
    for m in CLAIM_MODELS:
        r = {g: best_per_mw(m, inst, tps, tpot_ms, like if g == "trn3" else None) for g, inst, tps in CLAIM_SYSTEMS}
        ratio = r["trn3"][0] / r["trn2"][0] if r["trn2"][0] else float("nan")
        tab.add_row(m, f"{r['trn2'][0]:,.0f}", f"({r['trn2'][1]}, {r['trn2'][2]}, {r['trn2'][3]:.1f})",
                    f"{r['trn3'][0]:,.0f}", f"({r['trn3'][1]}, {r['trn3'][2]}, {r['trn3'][3]:.1f})", f"{ratio:.2f}x")
    out.print(tab)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", action="store_true", help="fit trn2 and trn3 constants first")
    ap.add_argument("--write", action="store_true", help="with --refit: record them in the data files")
    ap.add_argument("--rounds", type=int, default=2, help="coordinate-search rounds of the fit")
    ap.add_argument("--closed-form", action="store_true", help="basic estimate + hand formulas (any version)")
    ap.add_argument("--claims", action="store_true", help="only the published claim: Trn3 vs Trn2 output "
                    "tokens per megawatt at similar latency per user")
    ap.add_argument("--tpot-ms", type=float, default=25.0, help="--claims: the per-user latency bound")
    args = ap.parse_args()
    out = console()
    if args.closed_form:
        return closed_form(out)
    if args.claims:
        return claims(out, args.tpot_ms)
    from trnsim.model.serving_calibrate import current, evaluate, fit, runs
    constants = None
    if args.refit:
        constants = {}
        for gen in ("trn2", "trn3"):
            t = time.perf_counter()
            constants[gen] = fit(gen, current(gen), rounds=args.rounds, log=out.print)
            out.print(f"{gen} fitted in {time.perf_counter() - t:.0f} s: " +
                      ", ".join(f"{k}={v:.4g}" for k, v in constants[gen].items()))
    res = evaluate(constants)
    if args.refit and args.write:
        from trnsim.model.serving_write import write
        for gen in ("trn2", "trn3"):
            out.print("wrote", write(gen, constants[gen], [r for r in res if r.generation == gen]))
    tab = Table(title="trn2/trn3 serving rows: predicted vs published", title_justify="left")
    for c in ("row", "gen", "model", "metric", "published", "predicted", "error", "held out"):
        tab.add_column(c)
    for r in res:
        tab.add_row(r.id, r.generation, r.model, r.metric, f"{r.published:.4g}", f"{r.predicted:.4g}",
                    f"{r.error:+.1%}", "yes" if r.holdout else "")
    out.print(tab)
    tab = Table(title="Per generation", title_justify="left")
    for c in ("generation", "rows", "median |error|", "bias", "fitted rows", "median |err|", "held out",
              "median |err| "):
        tab.add_column(c)
    for gen in ("trn2", "trn3"):
        n, m, b = summary(res, gen)
        nf, mf, _ = summary(res, gen, False)
        nh, mh, _ = summary(res, gen, True)
        tab.add_row(gen, str(n), f"{m:.1%}", f"{b:+.1%}", str(nf), f"{mf:.1%}", str(nh), f"{mh:.1%}")
    out.print(tab)
    orderings(out, res)
    for r in res:
        out.print(f"  {r.id}: {runs()[r.id]['why']}")


if __name__ == "__main__":
    main()
