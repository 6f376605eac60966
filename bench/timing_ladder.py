"""Predicted vs published: the matmul optimization ladders on [4096,8192] x [8192,8192].

trn1 (bf16): latency and hardware FLOPs utilization for each row of bench/data/kernels.csv (a verbatim
copy of shared/calibration/kernels.csv, so a user's clone has the published rows; K001-K008).
trn2 (fp32): engine busy shares (K040-K048; the guide publishes no latencies).
The kernels run in timing-only mode (shapes, regions and dependencies are traced; no numerics).

    python bench/timing_ladder.py [--json] [--size 4096x8192x8192]
"""
import argparse
import csv
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
CAL = os.path.join(HERE, "data", "kernels.csv")  # in the repository: works from a user's clone


def published():
    rows = {}
    path = os.environ.get("TRNSIM_CALIBRATION", CAL)
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[r["id"]] = (r["metric"], float(r["value"]))
    return rows


def run(size=(4096, 8192, 8192), progress=None):
    """Every ladder row; ``progress(row)`` is called as each kernel finishes."""
    import trnsim.compat
    trnsim.compat.install()
    import ml_dtypes
    import numpy as np
    from trnsim.options import Options
    from trnsim.profile.summary import summarize
    from trnsim.timing import estimate_run
    from ladder_kernels import TRN1_LADDER
    M, K, N = size
    pub = published()
    out = {"trn1": [], "trn2": []}
    a = np.zeros((K, M), dtype=ml_dtypes.bfloat16)
    b = np.zeros((K, N), dtype=ml_dtypes.bfloat16)
    opts = Options(target="trn1", timing_only=True)
    for name, kern, (lat_id, hfu_id) in TRN1_LADDER:
        t0 = time.perf_counter()
        est = estimate_run(kern.run(a, b, options=opts))
        s = summarize(est).to_dict()
        row = {"kernel": name, "pred_latency_ms": s["latency_us"] / 1e3, "pred_hfu_pct": 100 * s["hfu"],
               "instructions": s["instructions"], "bottleneck": s["bottleneck"],
               "sim_seconds": round(time.perf_counter() - t0, 2)}
        if lat_id in pub:
            row["pub_latency_ms"] = pub[lat_id][1]
            row["latency_err_pct"] = 100 * (row["pred_latency_ms"] / row["pub_latency_ms"] - 1)
            row["pub_hfu_pct"] = pub[hfu_id][1]
            row["rows"] = [lat_id, hfu_id]
        out["trn1"].append(row)
        if progress is not None:
            progress(row)
    # trn1 LayerNorm tutorial rows (input [300, 1000] fp32)
    from layernorm_kernels import layernorm_v1, layernorm_v2
    x = np.zeros((300, 1000), np.float32)
    g = np.zeros(1000, np.float32)
    out["trn1_layernorm"] = []
    for name, kern, rid in (("layernorm_v1", layernorm_v1, "K038"), ("layernorm_v2", layernorm_v2, "K039")):
        est = estimate_run(kern.run(x, 1e-5, g, g, options=Options(target="trn1", timing_only=True)))
        row = {"kernel": name, "pred_latency_us": est.latency_us, "row": rid}
        if rid in pub:
            row["pub_latency_us"] = pub[rid][1]
        out["trn1_layernorm"].append(row)
        if progress is not None:
            progress(row)
    try:
        from ladder_kernels_trn2 import TRN2_LADDER
    except ImportError as e:  # the new-API front end is missing
        out["trn2_error"] = str(e)
        return out
    a32 = np.zeros((K, M), dtype=np.float32)
    b32 = np.zeros((K, N), dtype=np.float32)
    # our own kernels: their loops are regular, so the new-API loops are fast-forwarded too
    # (tests/nki/test_fastforward.py checks the traces equal full unrolling)
    opts2 = Options(target="trn2", timing_only=True, fast_forward="all")
    for name, kern, ids in TRN2_LADDER:
        t0 = time.perf_counter()
        est = estimate_run(kern.run(a32, b32, options=opts2))
        s = summarize(est).to_dict()
        eng = s["engines"]
        pred = {"dma": 100 * eng["DMA (any queue)"], "tensor": 100 * eng["Tensor"],
                "vector": 100 * eng["Vector"]}
        row = {"kernel": name, "pred_latency_ms": s["latency_us"] / 1e3,
               "bottleneck": s["bottleneck"], "sim_seconds": round(time.perf_counter() - t0, 2)}
        for k, rid in ids.items():
            row[f"pred_{k}_active_pct"] = round(pred[k], 2)
            if rid in pub:
                row[f"pub_{k}_active_pct"] = pub[rid][1]
        out["trn2"].append(row)
        if progress is not None:
            progress(row)
    return out


def table(out):
    from trnsim.cli.output import console
    from rich.table import Table
    con = console()
    t = Table(title="trn1 matmul ladder, [4096,8192] x [8192,8192] bf16: predicted vs published")
    for c in ("kernel", "pred ms", "published ms", "error", "pred HFU", "published HFU", "rows",
              "bottleneck"):
        t.add_column(c)
    for r in out["trn1"]:
        t.add_row(r["kernel"], f"{r['pred_latency_ms']:.2f}", f"{r.get('pub_latency_ms', float('nan')):.2f}",
                  f"{r.get('latency_err_pct', float('nan')):+.1f} %", f"{r['pred_hfu_pct']:.1f} %",
                  f"{r.get('pub_hfu_pct', float('nan')):.2f} %", ",".join(r.get("rows", [])),
                  r["bottleneck"])
    con.print(t)
    if out.get("trn1_layernorm"):
        t3 = Table(title="trn1 LayerNorm [300, 1000] fp32: predicted vs published (p50)")
        for c in ("kernel", "pred us", "published us", "row"):
            t3.add_column(c)
        for r in out["trn1_layernorm"]:
            t3.add_row(r["kernel"], f"{r['pred_latency_us']:.1f}", f"{r.get('pub_latency_us', float('nan')):.0f}",
                       r["row"])
        con.print(t3)
    if out.get("trn2"):
        t2 = Table(title="trn2 ladder (fp32): engine busy shares, predicted / published")
        for c in ("kernel", "pred ms", "DMA active", "Tensor active", "Vector active", "bottleneck"):
            t2.add_column(c)
        for r in out["trn2"]:
            def cell(k):
                p = r.get(f"pred_{k}_active_pct")
                q = r.get(f"pub_{k}_active_pct")
                return "" if p is None else (f"{p:.1f} / {q:.2f} %" if q is not None else f"{p:.1f} %")
            t2.add_row(r["kernel"], f"{r['pred_latency_ms']:.2f}", cell("dma"), cell("tensor"),
                       cell("vector"), r["bottleneck"])
        con.print(t2)
    elif out.get("trn2_error"):
        con.print(f"trn2 ladder skipped: {out['trn2_error']}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--size", default="4096x8192x8192", help="MxKxN")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    from trnsim.cli.output import error_console
    err = error_console()
    with err.status("timing the ladder kernels") as status:
        # a status line on stderr names the last finished kernel; stdout holds only the output
        res = run(size, progress=lambda row: status.update(f"done: {row['kernel']}"))
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        table(res)
