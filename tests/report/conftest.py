"""Headless Chromium helpers for the report tests: screenshot (decoded with zlib + numpy) and DOM dump."""
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

import numpy as np
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def _run(args, timeout=120):
    with tempfile.TemporaryDirectory() as prof:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={prof}", *args], capture_output=True,
                              timeout=timeout, text=False)


def screenshot(html_path: str, png_path: str, size=(1000, 1100)) -> np.ndarray:
    """Render the page and return its pixels (H x W x C, uint8)."""
    _run([f"--window-size={size[0]},{size[1]}", f"--screenshot={png_path}", "--virtual-time-budget=5000",
          "file://" + os.path.abspath(html_path)])
    return decode_png(open(png_path, "rb").read())


def dump_dom(html_path: str) -> str:
    """The DOM after scripts ran."""
    r = _run(["--virtual-time-budget=5000", "--dump-dom", "file://" + os.path.abspath(html_path)])
    return r.stdout.decode("utf-8", "replace")


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB / RGBA, non-interlaced PNG -> array (the PNG spec's five row filters undone)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), dtype=np.int64)
    prev = np.zeros(w * ch, dtype=np.int64)
    for y in range(h):
        f, row = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = row
        elif f == 1:   # Sub: a running sum per channel
            cur = np.cumsum(row.reshape(w, ch), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (row + prev) % 256
        else:   # Average / Paeth depend on the byte to the left: plain Python lists are fastest here
            r, up, cur = row.tolist(), prev.tolist(), [0] * (w * ch)
            for x in range(w * ch):
                a = cur[x - ch] if x >= ch else 0
                c = up[x - ch] if x >= ch else 0
                cur[x] = (r[x] + ((a + up[x]) // 2 if f == 3 else _paeth(a, up[x], c))) & 255
            cur = np.array(cur, dtype=np.int64)
        out[y], prev = cur, cur
    return out.reshape(h, w, ch).astype(np.uint8)


@pytest.fixture
def chromium():
    """Skip when no Chromium is installed (.ci/run installs it)."""
    if not CHROMIUM:
        pytest.skip("chromium is not installed")
    return {"screenshot": screenshot, "dump_dom": dump_dom}
