"""Size and build time of the HTML profile (and the Perfetto trace) of a long kernel.

    python bench/profile_html.py [--reps N] [--out DIR] [--json] [--chromium]

Builds a kernel of about 400k instructions (N passes over a 333-tile row: each tile loaded,
exponentiated and stored back; the default N=400 gives 399,600 instructions), times it, then
prints: instructions, latency, the analysis and summary times, the HTML build time (given both)
and page size, the Perfetto
write time and size, and with --chromium the time headless Chromium takes to load the page and draw
the timeline (the page reports it) plus a screenshot zoomed in to single instructions.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def long_kernel(reps: int, target: str = "trn2"):
    """The timed estimate of ``reps`` passes of load / exp / store over 333 tiles of 128 x 64."""
    import numpy as np
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    from trnsim.options import Options
    from trnsim.timing import estimate_run

    @nki.jit
    def passes(x, reps):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(reps):
            for j in nl.affine_range(x.shape[1] // 64):
                t = nl.load(x[:, j * 64:(j + 1) * 64])
                nl.store(out[:, j * 64:(j + 1) * 64], value=nl.exp(t))
        return out

    x = np.zeros((128, 64 * 333), np.float32)
    return estimate_run(passes.run(x, reps, options=Options(target=target, timing_only=True)))


def chromium_view(page: str, hash_: str, png: str = "", size=(1400, 900)) -> dict:
    """Load ``page#hash_`` in headless Chromium: the page's own load time, axis and view dumps,
    and (with ``png``) a screenshot."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        return {}
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             "--virtual-time-budget=30000", f"--window-size={size[0]},{size[1]}"]
    url = "file://" + os.path.abspath(page) + "#" + hash_
    out = {}
    with tempfile.TemporaryDirectory() as prof:
        t = time.perf_counter()
        dom = subprocess.run([exe, *flags, f"--user-data-dir={prof}", "--dump-dom", url],
                             capture_output=True, timeout=300).stdout.decode("utf-8", "replace")
        out["chromium_dump_dom_s"] = round(time.perf_counter() - t, 2)
        if png:
            subprocess.run([exe, *flags, f"--user-data-dir={prof}", f"--screenshot={png}", url],
                           capture_output=True, timeout=300)
    out.update(dump_fields(dom))
    return out


def dump_fields(dom: str) -> dict:
    """The JSON the page leaves in its hidden dump elements, and its status line."""
    import html
    import re
    out = {}
    for key in ("axis-dump", "view-dump", "tip-dump"):
        m = re.search(rf'<pre id="{key}"[^>]*>(.*?)</pre>', dom, re.S)
        if m and m.group(1).strip():
            out[key] = json.loads(html.unescape(m.group(1)))
    m = re.search(r'<p class="small" id="status">(.*?)</p>', dom, re.S)
    out["status"] = html.unescape(m.group(1)) if m else ""
    m = re.search(r"timeline ready (\d+) ms", out["status"])
    out["page_load_ms"] = int(m.group(1)) if m else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="passes (3 x 333 instructions each)")
    ap.add_argument("--out", default=tempfile.gettempdir())
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--chromium", action="store_true", help="also load it in headless Chromium")
    ap.add_argument("--png", default="/tmp/h3_zoom.png", help="zoomed-in screenshot (with --chromium)")
    args = ap.parse_args()
    from trnsim.profile.html import write_html
    from trnsim.profile.insight import analyze
    from trnsim.profile.perfetto import write_perfetto
    from trnsim.profile.summary import summarize
    r = {}
    t = time.perf_counter()
    est = long_kernel(args.reps)
    r["kernel_and_timing_s"] = round(time.perf_counter() - t, 2)
    r["instructions"] = est.instructions
    r["latency_us"] = round(est.latency_us, 1)
    t = time.perf_counter()
    a = analyze(est)
    r["analysis_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    summ = summarize(est, analysis=a)   # the terminal summary the CLI prints anyway; the page reuses it
    r["summary_s"] = round(time.perf_counter() - t, 2)
    page = os.path.join(args.out, "profile_long.html")
    t = time.perf_counter()
    write_html(est, page, analysis=a, summary=summ)
    r["html_build_s"] = round(time.perf_counter() - t, 2)
    r["html_bytes"] = os.path.getsize(page)
    trace = os.path.join(args.out, "profile_long.perfetto.json")
    t = time.perf_counter()
    write_perfetto(est, trace, analysis=a, summary=summ)
    r["perfetto_write_s"] = round(time.perf_counter() - t, 2)
    r["perfetto_bytes"] = os.path.getsize(trace)
    if args.chromium:
        whole = chromium_view(page, "")
        r["page_load_ms"] = whole.get("page_load_ms")
        r["chromium_dump_dom_s"] = whole.get("chromium_dump_dom_s")
        r["zoomed_out_view"] = whole.get("view-dump")
        c = est.cores[0]
        i = len(c.trace) - 30          # ~8 instructions near the end, where the listed critical path runs
        s = float(c.timeline.start[i])
        span = 4 * float(c.timeline.busy_end[i] - c.timeline.start[i] + 50)
        zoom = chromium_view(page, f"zoom={s - span:.2f},{s + span:.2f}&critical=1&tip=0,{i}", args.png)
        r["zoomed_in_view"] = zoom.get("view-dump")
        r["zoomed_in_ticks"] = [k["label"] for k in zoom.get("axis-dump", {}).get("ticks", [])]
        r["screenshot"] = args.png
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        w = max(len(k) for k in r)
        for k, v in r.items():
            print(f"{k:<{w}}  {v}")


if __name__ == "__main__":
    main()
