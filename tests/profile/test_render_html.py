"""The HTML profile explains: each section with the figures of the analysis (a hand-written one,
and a hand-counted three-instruction kernel), the roofline point, timeline columns holding every
slice once, and in headless Chromium: the tooltip carries the Perfetto slice's fields, and a long
kernel zoomed in to single instructions with axis labels that do not overlap."""
import base64
import html as htmlmod
import json
import os
import re
import shutil
import subprocess
import zlib

import numpy as np
import pytest


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs it)")


# fixtures `matmul` and `double`: tests/profile/conftest.py

def rows(page: str, table_id: str):
    """The text of each data row of the table with ``table_id``."""
    m = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert m, table_id
    out = []
    for tr in re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        if cells:
            out.append([htmlmod.unescape(c) for c in cells])
    return out


FAKE = {
    "core": 0,
    "hotspots": {"by_line": [{"source": "k.py:12", "code": "t = nl.exp(x)", "time_ns": 1500.0, "share": 0.625,
                              "instructions": 3, "engines": {"Scalar": 2, "Vector": 1}}],
                 "by_opcode": [{"opcode": "activation", "engine": "Scalar", "time_ns": 2250.0, "share": 0.5,
                                "instructions": 7}]},
    "stalls": {"Vector": {"busy_ns": 1000.0, "idle_ns": 3000.0,
                          "waiting_on": {"Scalar": 2000.0, "DMA:q3": 750.0, "start-up": 250.0},
                          "top": [{"instruction": 9, "opcode": "tensor_copy", "source": "k.py:14", "wait_ns": 640.0,
                                   "waited_on": {"instruction": 8, "engine": "Scalar", "opcode": "activation",
                                                 "source": "k.py:12"}}]}},
    "critical_path": [{"instruction": 0, "engine": "DMA:q0", "opcode": "dma_copy", "source": "k.py:10",
                       "start_ns": 0.0, "end_ns": 800.0},
                      {"instruction": 1, "engine": "Scalar", "opcode": "activation", "source": "k.py:12",
                       "start_ns": 800.0, "end_ns": 1000.0}],
    "dma": {"transfers": [{"instruction": 0, "opcode": "dma_copy", "source": "k.py:10", "bytes": 65536,
                           "contiguous_bytes_per_partition": 512, "efficiency": 0.4321, "queues": [0, 1, 2, 5],
                           "start_ns": 0.0, "dur_ns": 800.0, "direction": "hbm->sbuf"}],
            "fixed_gaps": [{"label": "start-up", "start_ns": 0.0, "dur_ns": 1300.0},
                           {"label": "before the final store", "start_ns": 5000.0, "dur_ns": 42.0}],
            "summary": {"transfers": 2, "bytes": 131072, "mean_efficiency": 0.5}},
    "speed_of_light": {"flops": 2e9, "peak_flops_per_s": 100e12, "flops_share": 0.25, "hbm_bytes": 10 ** 8,
                       "peak_hbm_bytes_per_s": 500e9, "hbm_share": 0.4, "arithmetic_intensity": 20.0,
                       "ridge_point": 200.0, "bound": "memory", "hfu": 0.2},
    "occupancy": {"sbuf": {"t_ns": [0.0, 10.0], "bytes_per_partition": [0, 4096],
                           "capacity_bytes_per_partition": 196608, "peak": 4096},
                  "psum": {"t_ns": [0.0], "bytes_per_partition": [0], "capacity_bytes_per_partition": 16384,
                           "peak": 0}},
    "verdict": "Scalar-bound: a hand-written verdict",
}


def test_sections_show_the_figures_of_the_analysis(matmul):
    from trnsim.profile.html import render_html
    page = render_html(matmul, analysis=FAKE)
    for sid in ("timeline", "hotspots", "stalls", "critical-path", "dma", "speed-of-light"):
        assert f'<section id="{sid}">' in page, sid
    assert "Scalar-bound: a hand-written verdict" in page
    assert rows(page, "hotspots-line") == [["k.py:12", "t = nl.exp(x)", "1.500 µs", "62.5 %", "3",
                                            "Scalar (ACT) 2, Vector (DVE) 1"]]
    assert rows(page, "hotspots-opcode") == [["activation", "Scalar (ACT)", "2.250 µs", "50.0 %", "7"]]
    # stalls: 2000 of 3000 ns idle waiting on Scalar = 66.7 %, 750 on DMA q3 = 25.0 %
    assert "waiting on: Scalar (ACT) 2.000 µs (66.7 %); DMA q3 0.750 µs (25.0 %); start-up 0.250 µs (8.3 %)" in page
    assert rows(page, "stalls-top-vector") == [["9", "tensor_copy", "k.py:14", "0.640 µs",
                                                "#8 activation on Scalar (ACT) (k.py:12)"]]
    assert rows(page, "critical-table") == [["DMA q0", "1", "0.800 µs"], ["Scalar (ACT)", "1", "0.200 µs"]]
    assert rows(page, "dma-transfers") == [["0", "dma_copy", "k.py:10", "hbm->sbuf", "65,536", "512", "43.2 %",
                                            "q0-q2 q5", "0.000 µs", "0.800 µs"]]
    assert rows(page, "dma-gaps") == [["start-up", "0.000 µs", "1.300 µs"],
                                      ["before the final store", "5.000 µs", "0.042 µs"]]
    sol = dict(rows(page, "sol-table"))
    # achieved = 0.25 x 100 TFLOP/s; 0.4 x 500 GB/s = 200 GB/s
    assert sol["achieved FLOP/s"] == "25.00 TFLOP/s" and sol["achieved HBM bandwidth"] == "200.00 GB/s"
    assert sol["arithmetic intensity"] == "20.00 FLOP/B" and sol["ridge point"] == "200.00 FLOP/B"
    assert sol["HFU (hardware FLOPs utilization)"] == "20.0 %" and sol["bound"] == "memory"
    pt = re.search(r'<circle id="roofline-point" cx="([\d.]+)" cy="([\d.]+)"[^>]*data-intensity="([^"]+)" '
                   r'data-flops-per-s="([^"]+)"', page)
    assert pt and float(pt.group(3)) == 20.0 and float(pt.group(4)) == 25e12
    # below the ridge the roof is intensity x bandwidth = 10 TFLOP/s at 20 FLOP/B... the point is
    # drawn where the analysis puts it; its pixel x sits left of the ridge's (memory side)
    roof = re.search(r'<polyline id="roof" points="([^"]+)"', page).group(1).split()
    ridge_x = float(roof[1].split(",")[0])
    assert float(pt.group(1)) < ridge_x
    assert "SBUF peak 4.0 KiB per partition (2.1 % of 192 KiB)" in page
    meta, _ = _decode(page)               # the gaps also label a notes row of the timeline
    assert meta["cores"][0]["gaps"] == [["start-up", 0.0, 1300.0], ["before the final store", 5000.0, 42.0]]


def test_hand_counted_kernel(double):
    from trnsim.profile.html import render_html
    from trnsim.profile.insight import analyze
    page = render_html(double, analysis=analyze(double))
    tl = double.cores[0].timeline
    by_line = rows(page, "hotspots-line")
    assert sorted(int(r[4]) for r in by_line) == [1, 1, 1]           # one instruction per line
    load = [r for r in by_line if "nl.load" in r[1]][0]
    assert load[2] == f"{(tl.busy_end[0] - tl.start[0]) / 1e3:,.3f} µs" and load[5] == "DMA 1"
    tr = rows(page, "dma-transfers")
    assert {r[4] for r in tr} == {f"{128 * 2048 * 2:,}"}            # 524,288 bytes each way
    assert {r[5] for r in tr} == {"4,096"}                           # 2048 bf16 per partition row
    sol = dict(rows(page, "sol-table"))
    assert sol["HBM bytes"] == f"{2 * 128 * 2048 * 2:,}" and sol["FLOPs"] == "0"
    assert 'id="roofline-note"' in page and 'id="roofline-point"' not in page   # no PE work


def _decode(page: str):
    meta = json.loads(re.search(r'<script id="meta" type="application/json">(.*?)</script>', page, re.S)
                      .group(1).replace("<\\/", "</"))
    raw = base64.b64decode(re.search(r'<script id="blob"[^>]*>(.*?)</script>', page, re.S).group(1))
    raw = zlib.decompress(raw) if meta["z"] else raw
    kinds = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "f32": "<f4", "f64": "<f8"}

    def col(name):
        k, off, n = meta["cols"][name]
        return np.frombuffer(raw, kinds[k], n, off)
    return meta, col


@pytest.mark.parametrize("compress", [False, True])
def test_columns_hold_every_slice_once(matmul, monkeypatch, compress):
    from trnsim.profile import html
    monkeypatch.setattr(html, "COMPRESS_ABOVE", 0 if compress else 1 << 40)
    meta, col = _decode(html.render_html(matmul, analysis=False))
    assert meta["z"] is compress
    tl = matmul.cores[0].timeline
    tick = meta["tick_ns"]
    core = meta["cores"][0]
    seen = []
    for t in core["tracks"]:
        s = np.cumsum(col(t["d"]).astype(np.int64)) * tick
        e = s + col(t["du"]) * tick
        ins = col(t["ins"])
        assert np.all(np.diff(s) >= 0)                       # sorted by start: binary-searchable
        if t["kind"] == "engine":
            np.testing.assert_allclose(s, tl.start[ins], atol=tick)
            np.testing.assert_allclose(e, tl.busy_end[ins], atol=tick)
            seen += ins.tolist()
        else:
            dp = tl.dma_parts
            assert sorted(ins.tolist()) == sorted(dp.ins.tolist())   # every placement group once
            assert int(col(t["qn"]).sum()) == len(dp)                # and every queue part
            assert len(col(t["qs"])) == len(dp)
    compute = np.flatnonzero(tl.engine_code != 5).tolist()
    assert sorted(seen) == compute                          # every compute instruction exactly once
    names = [meta["names"][k] for k in col(core["name"])]
    assert names == [i.opcode for i in matmul.cores[0].trace]


# ---- headless Chromium --------------------------------------------------------------------------
def chromium(page: str, hash_: str = "", png: str = "", size=(1400, 900)) -> dict:
    """Load ``page#hash_``; return the JSON the page dumps (axis, view, tooltip) and its status."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=30000",
             f"--window-size={size[0]},{size[1]}", f"--user-data-dir={os.path.dirname(page)}/ud"]
    url = "file://" + os.path.abspath(page) + ("#" + hash_ if hash_ else "")
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, timeout=300).stdout.decode()
    if png:
        subprocess.run(flags + [f"--screenshot={png}", url], capture_output=True, timeout=300)
    out = {}
    for key in ("axis-dump", "view-dump", "tip-dump"):
        m = re.search(rf'<pre id="{key}"[^>]*>(.*?)</pre>', dom, re.S)
        out[key] = json.loads(htmlmod.unescape(m.group(1))) if m and m.group(1).strip() else None
    m = re.search(r'id="status">(.*?)</p>', dom, re.S)
    out["status"] = htmlmod.unescape(m.group(1)) if m else ""
    return out


def check_axis(axis: dict):
    """Tick labels: at least three, distinct, in order, and no two label boxes overlap."""
    ticks = axis["ticks"]
    assert len(ticks) >= 3
    labels = [t["label"] for t in ticks]
    assert len(set(labels)) == len(labels)
    for a, b in zip(ticks, ticks[1:]):
        assert a["x"] + 3 + a["w"] < b["x"] + 3, (a, b)      # each label is drawn at x + 3


@needs_chromium
def test_tooltip_carries_the_perfetto_slice_fields(matmul, tmp_path):
    from trnsim.profile.html import write_html
    from trnsim.profile.perfetto import trace_events
    page = str(tmp_path / "r.html")
    write_html(matmul, page, analysis=False)
    doc = trace_events(matmul, analysis=False)
    tl = matmul.cores[0].timeline
    pe = int(np.flatnonzero(tl.engine_code == 0)[0])
    dma = int(tl.dma_parts.ins[0])
    q0 = int(tl.dma_parts.queue[tl.dma_parts.off[0]])
    for i, queue in ((pe, None), (dma, q0)):
        got = chromium(page, f"expand=1&tip=0,{i}")["tip-dump"]
        want = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["args"]["instruction"] == i
                and (queue is None or ev["args"].get("queue") == queue)][0]
        assert got["name"] == want["name"]
        assert got["ts"] == pytest.approx(want["ts"], abs=1e-4) and got["dur"] == pytest.approx(want["dur"], abs=1e-4)
        assert got["args"] == want["args"]                   # same keys, same values


def long_estimate(reps: int):
    """``reps`` passes of load / exp / store over 333 tiles: 999 instructions a pass."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from profile_html import long_kernel
    return long_kernel(reps)


@needs_chromium
def test_long_kernel_zoomed_in_to_single_instructions(tmp_path):
    # ~40k instructions here; TRNSIM_LONG_PROFILE=1 runs the 400k-instruction kernel the issue names
    reps = 400 if os.environ.get("TRNSIM_LONG_PROFILE") else 40
    from trnsim.profile.html import write_html
    from trnsim.profile.insight import analyze
    est = long_estimate(reps)
    n = est.instructions
    assert n == 999 * reps
    page = str(tmp_path / "long.html")
    write_html(est, page, analysis=analyze(est))
    assert os.path.getsize(page) < 40 * n + 200_000         # compact columns, not a slice per object
    tl = est.cores[0].timeline
    # zoomed out: every slice is drawn, merged into bars; the axis still reads
    whole = chromium(page)
    assert "timeline ready" in whole["status"]
    view = whole["view-dump"]["tracks"]
    assert view["engine"]["individual"] + view["engine"]["merged_slices"] == int(np.sum(tl.engine_code != 5))
    assert view["dma"]["individual"] + view["dma"]["merged_slices"] == len(tl.dma_parts.ins)
    assert view["engine"]["merged_bars"] < 50
    assert view["note"]["individual"] + view["note"]["merged_slices"] >= 1     # start-up is labelled
    check_axis(whole["axis-dump"])
    # zoomed in near the end (where the listed critical path runs): a few single instructions
    i = n - 30
    s = float(tl.start[i])
    span = 4 * float(tl.busy_end[i] - tl.start[i] + 50)
    png = str(tmp_path / "zoom.png")
    z = chromium(page, f"zoom={s - span:.3f},{s + span:.3f}&critical=1&tip=0,{i}", png)
    v = z["view-dump"]["tracks"]
    assert v["engine"]["merged_bars"] == 0 and v["dma"]["merged_bars"] == 0
    assert 1 <= v["engine"]["individual"] <= 20 and v["dma"]["individual"] >= 1
    check_axis(z["axis-dump"])
    assert z["axis-dump"]["t1"] - z["axis-dump"]["t0"] == pytest.approx(2 * span, rel=1e-6)
    assert z["tip-dump"]["args"]["instruction"] == i
    from test_outputs import _png_pixels
    px = _png_pixels(png).astype(int)
    assert px.std() > 5
    if os.environ.get("TRNSIM_LONG_PROFILE"):
        shutil.copy(png, "/tmp/h3_zoom.png")
