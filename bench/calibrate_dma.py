"""Fit NeuronCore-v2's HBM-transfer DMA efficiency on the trn1 matmul ladder (calibration rows
K001, K003, K005, K007 of bench/data/kernels.csv, a verbatim copy of the shared calibration rows).

Each of the four kernels keeps all 16 DMA queues busy (trnsim calls every one DMA-bound once the HBM
curve is fitted; the first three are DMA-bound under the generic FIG-DMA curve as well), so its
published latency gives the DMA throughput the core reached: bytes moved / latency.  Divided by the
16 engines x 17 B/ns of the DMA table, that is the efficiency of the row's transfers.  The rows move
256 B, 1 KiB, 2 KiB and 4 KiB per partition and reach the same throughput within 3 %, so the fit is
one flat efficiency (the median of the rows) from the smallest chunk measured up; the script then
re-times the ladder with it and prints each row's error.

    python bench/calibrate_dma.py [--json]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ROWS = ("K001", "K003", "K005", "K007")     # trn1 ladder latencies (ms, p99)
SMALLEST_CHUNK = 256                        # bytes per partition of K001's lhsT tiles
FIG_ONLY = """
[cores.v2.timing.dma]
hbm_efficiency_bytes = { value = [], source = "bench/calibrate_dma.py: the generic curve only" }
hbm_efficiency = { value = [], source = "bench/calibrate_dma.py: the generic curve only" }
"""
FITTED = """
[cores.v2.timing.dma]
hbm_efficiency_bytes = {{ value = [{lo}, 32768], source = "bench/calibrate_dma.py" }}
hbm_efficiency = {{ value = [{e:.4f}, {e:.4f}], source = "bench/calibrate_dma.py" }}
"""


def _time(hw):
    """(row id, published ms, predicted ms, DMA bytes, DMA-queue busy share) per ladder row."""
    import ml_dtypes
    import numpy as np
    import trnsim.compat
    trnsim.compat.install()
    from trnsim.options import Options
    from trnsim.timing.estimate import estimate
    from ladder_kernels import TRN1_LADDER
    from timing_ladder import published
    pub = published()
    a = np.zeros((8192, 4096), dtype=ml_dtypes.bfloat16)
    b = np.zeros((8192, 8192), dtype=ml_dtypes.bfloat16)
    out = []
    for _, kern, (lat_id, _) in TRN1_LADDER:
        if lat_id not in ROWS or lat_id not in pub:
            continue
        tr = kern.run(a, b, options=Options(target="trn1", timing_only=True, hardware_file=hw)).traces
        e = estimate(tr, "trn1", hw)
        f = e.figures()
        out.append((lat_id, pub[lat_id][1], e.latency_us / 1e3, f.dma_bytes,
                    f.engines.get("DMA (any queue)", 0.0)))
    return out


def _hw(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    return f.name


def fit():
    """The implied efficiency per row and their median, and the ladder re-timed with it."""
    from trnsim.hardware import load_catalog
    core = load_catalog().cores["v2"]
    peak = core.dma_engines * core.timing.dma.engine_bytes_per_ns     # bytes per ns
    fig = _hw(FIG_ONLY)
    try:
        rows = [{"row": r, "published_ms": p, "fig_ms": round(ms, 2), "dma_bytes": b,
                 "gb_per_s": round(b / (p * 1e6), 2), "efficiency": round(b / (p * 1e6) / peak, 4)}
                for r, p, ms, b, _ in _time(fig)]
    finally:
        os.unlink(fig)
    eff = statistics.median(r["efficiency"] for r in rows)
    fitted = _hw(FITTED.format(lo=SMALLEST_CHUNK, e=eff))
    try:
        for r, (_, p, ms, _, busy) in zip(rows, _time(fitted)):
            r["fitted_ms"] = round(ms, 2)
            r["fitted_err_pct"] = round(100 * (ms / p - 1), 1)
            r["dma_busy"] = round(busy, 3)
    finally:
        os.unlink(fitted)
    return {"efficiency": round(eff, 4), "peak_bytes_per_ns": peak, "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = fit()
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    from rich.table import Table
    from trnsim.cli.output import console
    t = Table(title=f"trn1 HBM-transfer DMA efficiency: median {res['efficiency']} of "
                    f"{res['peak_bytes_per_ns']:.0f} B/ns")
    for c in ("row", "published ms", "FIG-DMA ms", "GB/s reached", "efficiency", "fitted ms",
              "error", "DMA busy"):
        t.add_column(c, justify="right")
    for r in res["rows"]:
        t.add_row(r["row"], f"{r['published_ms']:.2f}", f"{r['fig_ms']:.2f}", f"{r['gb_per_s']:.1f}",
                  f"{r['efficiency']:.4f}", f"{r['fitted_ms']:.2f}", f"{r['fitted_err_pct']:+.1f} %",
                  f"{100 * r['dma_busy']:.0f} %")
    console().print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
