"""GPU calibration rows (shared/calibration/gpus.csv P294, P301, P310): predicted vs published.

The step time of a dense transformer comes from the hand formula 6 x N x tokens (+ causal attention
FLOPs) divided by the calibrated achieved FLOP/s of trnsim/model/gpu (GpuOpCosts with the factors of
trnsim/model/gpu/data/efficiency.toml).  This is a stand-in: once the model-level estimator lands
(trnsim/model op graphs + parallelism + collectives), it replaces the hand formula here and the
factors are re-fitted through it.

    python bench/gpu_calibration.py [--json]
"""
import argparse
import json
import sys
import time


def run():
    """Fitted factors, per-row efficiencies and predictions, as plain data."""
    from trnsim.model.gpu.calibration import (fit_factors, load_models, load_runs, predict_runs, row_fits,
                                              train_flops_per_token)
    from trnsim.model.gpu.efficiency import load_efficiency
    models, runs = load_models(), load_runs()
    eff = load_efficiency()
    return {
        "fit": fit_factors(runs, models),
        "file": {"matmul": dict(eff.matmul), "attention": dict(eff.attention),
                 "attention_precision": eff.attention_precision},
        "rows": [{"row": f.row, "gpu": f.gpu, "precision": f.precision,
                  "flops_per_token": f.flops_per_token, "achieved_tflops_per_gpu": f.achieved_flops_per_gpu / 1e12,
                  "efficiency_all_at_row_precision": f.efficiency} for f in row_fits(runs, models)],
        "predictions": [p.to_dict() for p in predict_runs(runs, models)],
        "leave_one_out_bf16": _leave_one_out(runs, models),
        "nvidia_flops_per_sample_check": {
            m: train_flops_per_token(d, 8192, causal=False) * 8192 for m, d in models.items()},
    }


def _leave_one_out(runs, models):
    """bf16 rows: fit on all but one, predict the one left out (the only held-out check 3 rows allow)."""
    from trnsim.model.gpu.calibration import row_fits
    fits = {f.row: f for f in row_fits(runs, models)}
    bf16 = [r.row for r in runs if r.precision == "bf16"]
    out = {}
    for held in bf16:
        rest = [fits[r].efficiency for r in bf16 if r != held]
        if rest:
            eff = sum(rest) / len(rest)
            out[held] = {"fitted_on": [r for r in bf16 if r != held], "factor": eff,
                         "step_error": fits[held].efficiency / eff - 1.0}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = run()
    out["wall_s"] = time.perf_counter() - t0
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
    t = Table(title="GPU calibration rows: predicted vs published (hand step formula / calibrated FLOP/s)")
    for c in ("row", "GPU", "model", "prec", "GPUs", "step s pub", "step s pred", "err", "tok/s/GPU pub",
              "tok/s/GPU pred"):
        t.add_column(c, justify="right" if c not in ("row", "GPU", "model", "prec") else "left")
    for p in out["predictions"]:
        t.add_row(p["row"], p["gpu"], p["model"], p["precision"], str(p["gpus"]), f"{p['published_step_s']:.2f}",
                  f"{p['predicted_step_s']:.2f}", f"{p['error'] * 100:+.1f} %",
                  f"{p['published_tokens_per_s_per_gpu']:,.0f}", f"{p['predicted_tokens_per_s_per_gpu']:,.0f}")
    con.print(t)
    t2 = Table(title="Per-row achieved FLOP/s (hand formula, causal attention) and the fitted factors")
    for c in ("row", "GPU", "prec", "FLOPs/token", "achieved TF/s/GPU", "eff. vs dense peak"):
        t2.add_column(c)
    for r in out["rows"]:
        t2.add_row(r["row"], r["gpu"], r["precision"], f"{r['flops_per_token']:.4g}",
                   f"{r['achieved_tflops_per_gpu']:.0f}", f"{r['efficiency_all_at_row_precision']:.3f}")
    con.print(t2)
    for prec, v in out["fit"].items():
        con.print(f"fit {prec}: {v:.4f}   efficiency.toml matmul.{prec}: {out['file']['matmul'][prec]:.4f}")
    for held, v in out["leave_one_out_bf16"].items():
        con.print(f"held out {held}: factor {v['factor']:.4f} from {', '.join(v['fitted_on'])} predicts its step "
                  f"time {v['step_error'] * 100:+.1f} %")
    con.print("check: non-causal hand FLOPs per 8192-token sample "
              + ", ".join(f"{m} {v:.3g}" for m, v in out["nvidia_flops_per_sample_check"].items())
              + " (NVIDIA publishes 4.74e14 for 8B in P301, 3.94e15 for 70B in P294)")
    con.print("P310 is reproduced by construction (one row sets the fp8 factor); the H100 rows share one "
              "bf16 factor. The full model estimator will replace this hand formula once trnsim/model lands.")
    con.print(f"wall time {out['wall_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
