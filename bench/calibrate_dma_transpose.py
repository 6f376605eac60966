"""Fit NeuronCore-v3's (trn2) SBUF-to-SBUF DMA-transpose throughput on calibration row P234, then
CHECK (no fit) the other trn2 prefill-attention rows with it.

The rows ran the public NKI library's context-encoding attention, whose time on trn2 is set by its
DMA transposes of the softmax probabilities (one [128, 512] bf16 tile, 1 KiB per partition, per
query group and key tile); trnsim's reference attention kernel follows that schedule.  The docs bound
the transpose at "up to 50 %" of copy throughput [ARCH3] and say nothing of the chunk-size curve
[FIG-DMA] of HBM transfers, so the figure fitted is the transpose's rate as a flat fraction of the 16
engines' copy rate (``transpose_sbuf_curve = false``), by bisection until the simulated time per head
at P234's shape equals P234's published time per head.  The script prints the fitted figure, each
row's error with it, and the same with the curve kept (the 50 % bound times the curve, the figure
before the fit).

    python bench/calibrate_dma_transpose.py [--json]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FIT_ROW = "P234"
CHECK_ROWS = ("P236", "P248/enabled", "P261/eager")
FLAT = """
[cores.v3.timing.dma]
transpose_sbuf_curve = {{ value = false, source = "bench/calibrate_dma_transpose.py" }}
transpose_sbuf_efficiency = {{ value = {e:.6f}, source = "bench/calibrate_dma_transpose.py" }}
"""
CURVE = """
[cores.v3.timing.dma]
transpose_sbuf_curve = { value = true, source = "bench/calibrate_dma_transpose.py: the curve kept" }
transpose_sbuf_efficiency = { value = 0.5, source = "bench/calibrate_dma_transpose.py: ARCH3 bound" }
"""


def _rows():
    """(label, kernel shape, published us per head) of the fit row and the check rows."""
    from single_ops import build_op, load_rows
    from trnsim.model.opcost.select import kernel_call
    out = {}
    for r in load_rows():
        label = r["id"] + (f"/{r['variant']}" if r["variant"] else "")
        if label == FIT_ROW or label in CHECK_ROWS:
            call = kernel_call(build_op(r), r["lnc"] or 1)
            out[label] = (call.shape, r["published_us"] / call.repeats)
    return out


def _per_head_us(shape, hw_text):
    from trnsim.kernels.timer import run_reference
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(hw_text)
    try:
        return run_reference("attention", shape, "bfloat16", "trn2", f.name).latency_us
    finally:
        os.unlink(f.name)


def fit(rows, lo=0.05, hi=1.0, tol_us=0.05):
    """The flat transpose efficiency at which P234's shape takes its published time per head."""
    shape, target = rows[FIT_ROW]
    if _per_head_us(shape, FLAT.format(e=hi)) > target:
        raise SystemExit(f"{FIT_ROW}: slower than published even at efficiency {hi}")
    while True:
        mid = (lo + hi) / 2
        t = _per_head_us(shape, FLAT.format(e=mid))
        if abs(t - target) <= tol_us or hi - lo < 1e-4:
            return round(mid, 4)
        lo, hi = (mid, hi) if t > target else (lo, mid)


def run():
    """The fitted figure and every row's per-head error with it and with the curve kept."""
    rows = _rows()
    e = fit(rows)
    out = {"fitted_transpose_sbuf_efficiency": e, "fit_row": FIT_ROW, "rows": []}
    for label, (shape, pub) in rows.items():
        flat = _per_head_us(shape, FLAT.format(e=e))
        curve = _per_head_us(shape, CURVE)
        out["rows"].append({"row": label, "role": "fit" if label == FIT_ROW else "check", "shape": shape,
                            "published_us_per_head": round(pub, 1), "fitted_us": round(flat, 1),
                            "fitted_error": round(flat / pub - 1, 4), "curve_x_0.5_us": round(curve, 1),
                            "curve_x_0.5_error": round(curve / pub - 1, 4)})
    return out


def main():
    """Command line: print the fit and the checks (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = run()
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print(f"fitted on {res['fit_row']}: SBUF->SBUF DMA transpose at "
          f"{res['fitted_transpose_sbuf_efficiency']:.4f} of copy throughput (flat)")
    for r in res["rows"]:
        print(f"  {r['row']:13s} {r['role']:5s} published {r['published_us_per_head']:7.1f} us/head  "
              f"fitted {r['fitted_us']:7.1f} ({r['fitted_error']:+.1%})  "
              f"curve x 0.5 {r['curve_x_0.5_us']:7.1f} ({r['curve_x_0.5_error']:+.1%})")


if __name__ == "__main__":
    main()
