"""Single-op rows (one GEMM, one attention) measured on trn2 and H100: published vs predicted, |error|, median.

    python bench/single_ops.py           # table and medians
    python bench/single_ops.py --json    # machine-readable rows and summary

The rows are copied, with their ids and sources, into bench/data/single_ops.csv (a user's clone has no
shared calibration folder).  Columns: id, variant (one row can hold two measurements), device, op, dtype, matmul m/k/n,
attention batch/heads/kv_heads/q_len/kv_len/head_dim/causal, lnc (physical cores of the logical core the
row ran on), published_us, published_as (the figure as the source states it), status (use | skip),
derivation (how each shape field not stated verbatim was read, or why the row is skipped), source,
impl (attention rows: the implementation the row states the hardware ran, fused | unfused).

trn2 rows: the op is built as the model layer builds it, ``trnsim.model.opcost.select.kernel_calls`` picks
the reference kernels in the row's attention implementation (fused: the decode kernel per KV head for a
few new tokens, the flash kernel per query head above; unfused: matmul, softmax and matmul with the scores
in HBM), their shapes on one physical core and repeat counts (LNC=2 splits the repeats, or the wider
matmul dimension, over the two cores), and ``trnsim.kernels.time_reference`` simulates each exact shape on
the trn2 timing model (no interpolation, no op-cost cache): predicted = sum of repeats x kernel time,
each times the Neuron compiler's factor (``trnsim.model.opcost.codegen``, calibrated on P226) for a GEMM a
framework compiled (eager / XLA rows, and every part of an unfused attention; a row whose source names an
NKI kernel ran hand-written code).
H100 rows: the same ``Op`` through the GPU op-cost models, ``GpuServingCosts`` (per-op serving
factors) and ``GpuOpCosts`` (training's lumped step factors).  The serving factors were fitted to these
H100 rows (serving.toml sources P250, P235, P239, P243, P245), so the H100 serving column is in-sample.
Error = predicted / published - 1 (positive: trnsim predicts slower).
"""
import argparse
import csv
import json
import os
import statistics
import sys
import time

from trnsim.errors import TrnsimError
from trnsim.kernels import time_reference
from trnsim.model.gpu.costs import GpuOpCosts
from trnsim.model.gpu.serving_costs import GpuServingCosts
from trnsim.model.opcost.codegen import codegen_scale
from trnsim.model.opcost.select import kernel_calls
from trnsim.model.ops import Op

ROWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "single_ops.csv")
INTS = ("m", "k", "n", "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "causal", "lnc")
BYTES = {"bfloat16": 2, "float32": 4}


def load_rows(path: str = ROWS):
    """The rows of the data file, numeric shape fields as ints (0 where empty)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in INTS:
            r[key] = int(r[key]) if r[key] else 0
        r["published_us"] = float(r["published_us"]) if r["published_us"] else None
    return rows


def build_op(r) -> Op:
    """The ``Op`` for a row, built with the model layer's conventions (trnsim/model/transformer.py:
    attention heads = query heads x batch, FLOPs halved when causal, KV read once per KV head)."""
    dt = r["dtype"]
    if r["op"] == "matmul":
        m, k, n = r["m"], r["k"], r["n"]
        return Op(kind="matmul", name=r["id"], dtype=dt, m=m, k=k, n=n,
                  flops=2.0 * m * k * n, bytes=float((m * k + k * n + m * n) * BYTES[dt]))
    if r["op"] == "attention":
        b, h, kvh, q, kv, d = r["batch"], r["heads"], r["kv_heads"], r["q_len"], r["kv_len"], r["head_dim"]
        causal = bool(r["causal"]) and q > 1
        flops = 4.0 * b * h * q * kv * d * (0.5 if causal else 1.0)
        byts = b * (q * h * 2 * d + kv * kvh * 2 * d) * BYTES[dt]
        return Op(kind="attention", name=r["id"], dtype=dt, q_len=q, kv_len=kv, head_dim=d, heads=h * b,
                  kv_heads=kvh * b, causal=causal, batch=1, flops=flops, bytes=float(byts))
    raise ValueError(f"row {r['id']}: no op builder for {r['op']!r}")


def row_codegen(r) -> str:
    """Who wrote the code the row ran: its ``codegen`` column where it has one, else ``nki`` when
    the row's source or published figure names an NKI kernel (a hand-written kernel repository),
    else ``framework`` (torch-neuronx eager / torch-xla: the Neuron compiler's code)."""
    if r.get("codegen"):
        return r["codegen"]
    text = " ".join(r.get(k) or "" for k in ("source", "published_as")).lower()
    return "nki" if "nki" in text else "framework"


def predict_trn2(r):
    """(seconds, how) for a trn2 row: the sum over its kernel calls of repeats x the reference kernel
    simulated at its exact shape x the compiler's factor where a framework compiled that kernel's op
    (model/opcost/data/codegen.toml; an unfused attention is framework code whatever the row names)."""
    impl = r.get("impl") or "fused"
    codegen = "framework" if impl == "unfused" else row_codegen(r)
    total, parts = 0.0, []
    for call in kernel_calls(build_op(r), r["lnc"] or 1, attention_impl=impl):
        scale = codegen_scale("matmul" if call.kernel == "bmm" else call.kernel, "trn2", codegen)
        total += time_reference(call.kernel, call.shape, call.dtype, "trn2") * call.repeats * scale
        shape = ",".join(f"{k}={v}" for k, v in call.shape.items())
        parts.append(f"{call.repeats:g} x {call.kernel}({shape}) {call.dtype}"
                     + (f" x {scale:g} compiler" if scale != 1.0 else ""))
    label = f"[{impl}] " if r["op"] == "attention" else ""
    return total, label + " + ".join(parts)


def _err(pred_s: float, pub_us: float) -> float:
    return pred_s * 1e6 / pub_us - 1.0


def run(rows):
    """Predictions for the rows marked use; skipped rows come back with their reason."""
    out, skipped = [], []
    serving, training = GpuServingCosts("h100"), GpuOpCosts("h100")
    for r in rows:
        label = r["id"] + (f"/{r['variant']}" if r["variant"] else "")
        if r["status"] != "use":
            skipped.append({"row": label, "device": r["device"], "op": r["op"], "why": r["derivation"]})
            continue
        item = {"row": label, "device": r["device"], "op": r["op"], "dtype": r["dtype"],
                "published_us": r["published_us"], "impl": r.get("impl") or ""}
        t0 = time.perf_counter()
        try:
            if r["device"] == "trn2":
                secs, how = predict_trn2(r)
                item.update(predicted_us=secs * 1e6, error=_err(secs, r["published_us"]), how=how)
            else:
                op = build_op(r)
                s_serv, s_train = serving.time(op).seconds, training.time(op).seconds
                item.update(predicted_us=s_serv * 1e6, error=_err(s_serv, r["published_us"]),
                            training_us=s_train * 1e6, training_error=_err(s_train, r["published_us"]),
                            how="GpuServingCosts h100-sxm (training GpuOpCosts in training_*)")
        except TrnsimError as e:
            item.update(predicted_us=None, error=None, how=f"refused: {e}")
        item["sim_wall_s"] = time.perf_counter() - t0
        item["note"] = r["derivation"]
        out.append(item)
    return out, skipped


def _median(items, key="error"):
    vals = [abs(i[key]) for i in items if i.get(key) is not None]
    return statistics.median(vals) if vals else None


def summary(out):
    """Median |error| per device (and the trn2 median over the rows without an unfused attention)."""
    trn2 = [i for i in out if i["device"] == "trn2"]
    gpu = [i for i in out if i["device"] != "trn2"]
    fused = [i for i in trn2 if i["impl"] != "unfused"]
    return {"trn2_median_abs_error": _median(trn2), "trn2_rows": len(trn2),
            "trn2_fused_only_median_abs_error": _median(fused), "trn2_fused_rows": len(fused),
            "h100_serving_median_abs_error": _median(gpu), "h100_rows": len(gpu),
            "h100_training_median_abs_error": _median(gpu, "training_error")}


def _pct(x, sign=True):
    if x is None:
        return "-"
    return f"{x * 100:+.1f} %" if sign else f"{x * 100:.1f} %"


def main(argv=None):
    """Print the table (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out, skipped = run(load_rows())
    summ = summary(out)
    if args.json:
        json.dump({"rows": out, "skipped": skipped, "summary": summ}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{'row':<14}{'dev':<6}{'op':<10}{'dtype':<9}{'published us':>13}{'predicted us':>13}"
          f"{'error':>10}  how")
    for i in out:
        pred = "refused" if i["predicted_us"] is None else f"{i['predicted_us']:.1f}"
        print(f"{i['row']:<14}{i['device']:<6}{i['op']:<10}{i['dtype']:<9}{i['published_us']:>13.1f}"
              f"{pred:>13}{_pct(i['error']):>10}  {i['how']}")
        if "training_us" in i:
            print(f"{'':<39}{'training model':>13}{i['training_us']:>13.1f}{_pct(i['training_error']):>10}")
    print()
    print(f"trn2: median |error| {_pct(summ['trn2_median_abs_error'], False)} over {summ['trn2_rows']} rows; "
          f"{_pct(summ['trn2_fused_only_median_abs_error'], False)} over the {summ['trn2_fused_rows']} rows where "
          "no unfused attention is timed")
    print(f"H100: median |error| {_pct(summ['h100_serving_median_abs_error'], False)} (serving op costs, fitted to "
          f"these rows) / {_pct(summ['h100_training_median_abs_error'], False)} (training op costs) over "
          f"{summ['h100_rows']} rows")
    print("\nskipped:")
    for s in skipped:
        print(f"  {s['row']:<14}{s['device']:<6}{s['op']:<14}{s['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
