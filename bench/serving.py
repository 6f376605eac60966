"""Every trn2/trn3 serving calibration row: predicted vs published, |error|, and per generation the median
|error| and the bias (median signed error), on the fitted rows and on the held-out rows.

    python bench/serving.py              # the recorded constants (data files)
    python bench/serving.py --refit      # fit each generation's constants first (not written)
    python bench/serving.py --refit --write   # ... and record them with the row ids
"""
import argparse
import statistics
import time

from rich.table import Table

from trnsim.cli.output import console
from trnsim.model.serving_calibrate import current, evaluate, fit, runs


def summary(res, gen, holdout=None):
    """(rows, median |error|, bias) of one generation's rows (optionally only held-out / fitted ones)."""
    sel = [r for r in res if r.generation == gen and (holdout is None or r.holdout == holdout)]
    if not sel:
        return 0, float("nan"), float("nan")
    return (len(sel), statistics.median(abs(r.error) for r in sel), statistics.median(r.error for r in sel))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", action="store_true", help="fit trn2 and trn3 constants first")
    ap.add_argument("--write", action="store_true", help="with --refit: record them in the data files")
    ap.add_argument("--rounds", type=int, default=2, help="coordinate-search rounds of the fit")
    args = ap.parse_args()
    out = console()
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
    for r in res:
        out.print(f"  {r.id}: {runs()[r.id]['why']}")


if __name__ == "__main__":
    main()
