"""Profile outputs: Perfetto trace-event JSON structure, the HTML report rendered by headless
Chromium (screenshot non-blank, timeline drawn), the CLI, and the legacy benchmark harness."""
import json
import os
import shutil
import subprocess
import sys
import zlib

import ml_dtypes
import numpy as np
import pytest



@pytest.fixture(scope="module")
def estimate(matmul):
    """The example matmul estimate (tests/profile/conftest.py)."""
    return matmul

def test_perfetto_json_is_valid_trace_event_format(estimate, tmp_path):
    from trnsim.profile.perfetto import write_perfetto
    p = tmp_path / "t.json"
    write_perfetto(estimate, str(p))
    doc = json.loads(p.read_text())
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ns", "ms")
    threads = {}
    slices = []
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("M", "X", "C", "s", "f")
        assert isinstance(ev["pid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index",
                                  "process_sort_index")
            if ev["name"] == "thread_name":
                threads[(ev["pid"], ev["tid"])] = ev["args"]["name"]
        elif ev["ph"] == "X":
            for k in ("ts", "dur", "name", "tid"):
                assert k in ev
            assert ev["dur"] >= 0 and ev["ts"] >= 0
            assert (ev["pid"], ev["tid"]) in threads  # every slice sits on a named track
            if ev["cat"] == "gap":   # a labelled fixed-cost gap on the notes thread: no instruction
                continue
            assert ":" in ev["args"]["source"] and ev["args"]["source"].split(":")[1].isdigit()
            slices.append(ev)
    names = set(threads.values())
    assert {"Tensor (PE)", "Vector (DVE)", "Scalar (ACT)", "GpSimd (POOL)"} <= names
    assert {f"DMA q{q}" for q in range(16)} <= names
    # every PE instruction of the trace appears once on the PE track, with the model's duration
    tl = estimate.cores[0].timeline
    pe = [e for e in slices if threads[(e["pid"], e["tid"])] == "Tensor (PE)"]
    n_pe = sum(1 for i in estimate.cores[0].trace if i.engine == "tensor")
    assert len(pe) == n_pe
    i0 = pe[0]["args"]["instruction"]
    assert pe[0]["dur"] == pytest.approx((tl.busy_end[i0] - tl.start[i0]) / 1e3, abs=1e-6)
    # the slices end no later than the estimated latency
    assert max(e["ts"] + e["dur"] for e in slices) <= estimate.latency_us + 1e-6


def _png_pixels(path):
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) with zlib only."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big"), body[8], body[9]
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for x in range(stride):
            a = cur[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 0:
                v = line[x]
            elif f == 1:
                v = line[x] + a
            elif f == 2:
                v = line[x] + b
            elif f == 3:
                v = line[x] + (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                v = line[x] + (a if pa <= pb and pa <= pc else (b if pb <= pc else c))
            cur[x] = v & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3]


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (.ci/run installs it)")
def test_html_report_renders_timeline_in_headless_chromium(estimate, tmp_path):
    from trnsim.profile.html import write_html
    page = tmp_path / "r.html"
    write_html(estimate, str(page))
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # self-contained
    shot = tmp_path / "s.png"
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'ud'}", "--window-size=800,700",
           "--hide-scrollbars", f"--screenshot={shot}", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120)
    assert shot.exists()
    px = _png_pixels(str(shot)).astype(int)
    assert px.std() > 5  # not blank
    # the PE track (blue) and the DMA queues (red) are drawn as slices
    blue = (abs(px[..., 0] - 0x4a) < 12) & (abs(px[..., 1] - 0x7f) < 12) & (abs(px[..., 2] - 0xd6) < 12)
    red = (abs(px[..., 0] - 0xd6) < 12) & (abs(px[..., 1] - 0x5a) < 12) & (abs(px[..., 2] - 0x5a) < 12)
    assert red.sum() > 500, "DMA slices missing from the timeline"
    assert blue.sum() > 50, "PE slices missing from the timeline"


def test_cli_kernel_json_summary(tmp_path, capsys):
    from trnsim.cli.main import main
    src = tmp_path / "k.py"
    src.write_text(
        "import neuronxcc.nki as nki\n"
        "import neuronxcc.nki.language as nl\n"
        "@nki.jit\n"
        "def double(x):\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.load(x)\n"
        "    nl.store(out, value=nl.multiply(t, 2.0))\n"
        "    return out\n")
    rc = main(["kernel", f"{src}::double", "--arg", "x=128x2048:bf16", "--target", "trn1", "--json",
               "--trace", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html")])
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    for k in ("latency_us", "instructions", "engines", "hfu", "hbm_bytes", "sim_seconds"):
        assert k in s
    assert s["instructions"] == 3 and s["hfu"] == 0.0
    assert s["hbm_bytes"] == 2 * 128 * 2048 * 2  # one load and one store of the bf16 tile
    assert (tmp_path / "t.json").exists() and (tmp_path / "t.html").exists()
    # timing-only gives the same timing without numerics
    rc = main(["kernel", f"{src}::double", "--arg", "x=128x2048:bf16", "--target", "trn1",
               "--json", "--timing-only"])
    s2 = json.loads(capsys.readouterr().out)
    assert s2["latency_us"] == s["latency_us"]


def test_cli_kernel_bad_spec_is_a_clean_error(tmp_path, capsys):
    from trnsim.cli.main import main
    assert main(["kernel", "nope.py::k"]) == 2
    assert "kernel-file" in capsys.readouterr().err


def test_legacy_benchmark_harness_reports_model_latency(tmp_path):
    import trnsim.compat
    trnsim.compat.install()
    from neuronxcc.nki import benchmark
    from trnsim.examples.matmul import matmul_tiled
    from trnsim.timing import estimate_run
    a = np.ones((128, 128), dtype=ml_dtypes.bfloat16)
    b = np.ones((128, 512), dtype=ml_dtypes.bfloat16)
    trace_file = tmp_path / "bench.ntff"
    bench = benchmark(warmup=2, iters=5, save_trace_name=str(trace_file))(matmul_tiled)
    bench(a, b)
    lat = bench.benchmark_result.nc_latency
    expect = estimate_run(matmul_tiled.run(a, b)).latency_us
    for p in (0, 1, 50, 99, 100):
        assert lat.get_latency_percentile(p) == pytest.approx(expect)
    assert os.path.getsize(trace_file) > 0


def test_perfetto_keeps_the_first_instructions_when_limited(estimate, tmp_path):
    from trnsim.profile.events import events
    from trnsim.profile.perfetto import instruction_limit, shown, write_perfetto
    n = len(estimate.cores[0].trace)
    p = tmp_path / "t.json"
    write_perfetto(estimate, str(p), max_instructions=5)
    doc = json.loads(p.read_text())
    idx = {ev["args"]["instruction"] for ev in doc["traceEvents"]
           if ev["ph"] == "X" and ev["cat"] != "gap"}
    assert idx == set(range(5))
    assert doc["otherData"]["truncated"] == {"instructions_shown_per_core": 5,
                                             "instructions_per_core": n}
    assert shown(estimate, 5) == 5 and shown(estimate, 0) is None
    # the default limit: the longest prefix of instructions whose slices fit the budget
    per = [0] * n
    for ev in events(estimate, details=False):
        per[ev.index] += 1
    budget = sum(per[:7]) + per[7] - 1     # one slice short of taking instruction 7 too
    assert instruction_limit(estimate, budget) == 7
    assert instruction_limit(estimate, sum(per)) == 0  # everything fits: no limit
