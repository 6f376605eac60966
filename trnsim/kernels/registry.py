"""The reference kernels by name: how to build a shape's (timing-only) arguments and launch options,
and the version that enters the op-cost cache key (bump it when a kernel's code changes)."""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Tuple

import numpy as np

from ..errors import ConfigError
from ..hardware.figures import lookup, read_package_toml

DTYPES = ("bfloat16", "float8_e4m3", "float32")


@dataclass(frozen=True)
class KernelSpec:
    """One reference kernel: module:function, its shape axes, version, and an args builder."""
    name: str
    target: str                     # "module:function" under trnsim.kernels
    axes: Tuple[str, ...]
    version: int
    build: Callable[[Mapping[str, int], np.dtype], Tuple[tuple, dict]]
    dtypes: Tuple[str, ...] = ("bfloat16", "float32")

    def load(self):
        """The jit kernel object (imports the NKI front end through the compat shims)."""
        from .. import compat
        compat.install()
        mod, fn = self.target.split(":")
        return getattr(importlib.import_module(f"trnsim.kernels.{mod}"), fn)


def _bad(kernel: str, what: str, value, limit) -> ConfigError:
    return ConfigError(f"reference kernel {kernel}: {what}", rule="reference-shape", limit=limit,
                       value=value)


def _tile(kernel: str, axis: str, n: int, tile: int) -> int:
    """The tile used along a dim: ``tile`` if n is a multiple of it, n itself when n < tile."""
    if n <= 0:
        raise _bad(kernel, f"{axis} must be positive", n, "> 0")
    if n < tile:
        return n
    if n % tile:
        raise _bad(kernel, f"{axis}={n} is not a multiple of the {tile}-wide tile", n,
                   f"a multiple of {tile}, or less than {tile}")
    return tile


def _block(n: int, tile: int, most: int) -> int:
    b = max(1, min(most, n // tile))
    while (n // tile) % b:
        b -= 1
    return b


def _zeros(shape, dt) -> np.ndarray:
    """A timing-only input: one zero repeated over ``shape`` (stride 0, no memory); the launch
    gives it a lazily mapped zero buffer instead of copying (nki/harness.py)."""
    return np.broadcast_to(np.zeros((), dt), shape)


def _tiling(kernel: str, key: str):
    """One of the reference kernels' tiling choices (data/tiling.toml, each with the hardware figure it
    follows)."""
    return lookup(_TILING, f"{kernel}.{key}", "kernels/data/tiling.toml")


def _read_tiling() -> dict:
    return read_package_toml(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiling.toml"))


_TILING = _read_tiling()


def _matmul(s, dt):
    m, k, n = s["m"], s["k"], s["n"]
    tm, tk, tn = _tile("matmul", "m", m, 128), _tile("matmul", "k", k, 128), _tile("matmul", "n", n, 512)
    # the block sizes of the public tutorial's fully blocked kernel (data/tiling.toml [matmul])
    kw = dict(TM=tm, TK=tk, TN=tn, SM=_block(m, tm, _tiling("matmul", "max_row_tiles")),
              BN=_block(n, tn, _tiling("matmul", "max_col_tiles")),
              BK=_block(k, tk, _tiling("matmul", "max_k_tiles")))
    # one row tile (decode, small batches): the GEMM streams the weights, so they move in 4-tile-wide
    # blocks (4 KiB bf16 rows per partition, where DMA saturates [DMABW])
    if m <= tm:
        kw["BN"] = _block(n, tn, _tiling("matmul", "stream_col_tiles"))
    # a row block of lhsT that fits hold_a_bytes per partition is loaded once (during its first
    # column block) instead of once per column block: the re-reads are pure HBM traffic, and in the
    # narrow rows of small row blocks (512 B at m = 256 bf16) DMA runs at 0.21 of peak [DMABW]
    held_bytes = k // tk * tm * kw["SM"] * np.dtype(dt).itemsize
    if n // (tn * kw["BN"]) >= 2 and held_bytes <= _tiling("matmul", "hold_a_bytes"):
        kw["HOLD_A"] = True
    # weight rows narrower than kp_row_bytes per partition (n under 512 bf16 columns): each K block
    # moves partition-major, BK rows per descriptor, instead of one row at 0.10-0.43 of peak [DMABW]
    # (KP = 2: lhsT's rows are narrow too and it is not held, so it moves the same way)
    item, narrow = np.dtype(dt).itemsize, _tiling("matmul", "kp_row_bytes")
    if kw["BK"] > 1 and tn * kw["BN"] * item < narrow:
        kw["KP"] = 2 if tm * kw["SM"] * item < narrow and not kw.get("HOLD_A") else 1
    return (_zeros((k, m), dt), _zeros((k, n), dt)), kw


def _bmm(s, dt):
    (a, b), kw = _matmul(s, dt)
    batch = s["batch"]
    if batch <= 0:
        raise _bad("bmm", "batch must be positive", batch, "> 0")
    return (_zeros((batch,) + a.shape, dt), _zeros((batch,) + b.shape, dt)), kw


def _attention(s, dt):
    q, kv, d, causal = s["q_len"], s["kv_len"], s["head_dim"], bool(s.get("causal", 0))
    if d > 128:
        raise _bad("attention", "head_dim over the 128 partitions", d, 128)
    tq = _tile("attention", "q_len", q, 128)
    tk = _tile("attention", "kv_len", kv, 512)
    if tk > 128 and tk % 128:
        raise _bad("attention", "kv_len under 512 must be a multiple of 128 or under 128", kv, 128)
    # causal with q_len > kv_len (first queries see no key) only serves as an interpolation corner
    kw = dict(causal=causal, TQ=tq, TK=tk, LT=_tiling("attention", "pv_keys"),
              QLOAD=_tiling("attention", "q_groups_per_load"))
    if np.dtype(dt).itemsize > 2:
        # 4-byte P and scores take twice the SBUF: half-length key sections (the library halves its
        # Q groups per load for fp32 for the same reason)
        kw.update(SEC=_tiling("attention", "section_keys") // 2,
                  SECTION_THRESHOLD=_tiling("attention", "section_threshold_keys") // 2)
    else:
        kw.update(SEC=_tiling("attention", "section_keys"),
                  SECTION_THRESHOLD=_tiling("attention", "section_threshold_keys"))
    return (_zeros((d, q), dt), _zeros((d, kv), dt), _zeros((kv, d), dt)), kw


def _attention_decode(s, dt):
    r, kv, d = s["rows"], s["kv_len"], s["head_dim"]
    if d > 128 or r > 128:
        raise _bad("attention_decode", "head_dim and rows must fit the 128 partitions", max(d, r), 128)
    # chunks of 2048 keys (4 KiB of bf16 per partition per DMA), else the largest that divides kv_len
    chunks = _tiling("attention_decode", "key_chunks")
    kc = next((c for c in chunks if c <= kv and kv % c == 0), 0)
    if kv < chunks[0] and kv % 128 == 0:
        kc = kv
    if not kc:
        raise _bad("attention_decode", f"kv_len={kv} is not a multiple of the 128-key tile", kv,
                   "a multiple of 128")
    # TG score tiles of [128, r] fp32 per PSUM bank (512 fp32): the most that fit and divide kc / 128
    n = kc // 128
    tg = max(t for t in range(1, n + 1) if n % t == 0 and t * r <= 512)
    h = s.get("heads", 1)
    return (_zeros((h, d, r), dt), _zeros((h, d, kv), dt), _zeros((h, kv, d), dt)), dict(KC=kc, TG=tg)


def _rows(kernel: str, n_in: int, extra=None):
    def build(s, dt):
        rows, cols = s["rows"], s["cols"]
        tp = _tile(kernel, "rows", rows, 128)
        args = tuple(_zeros((rows, cols), dt) for _ in range(n_in))
        kw = dict(TP=tp)
        if extra is not None:
            args, kw = extra(args, kw, rows, cols, dt)
        return args, kw
    return build


def _stream(fc_kw):
    def extra(args, kw, rows, cols, dt):
        kw["FC"] = _tile("stream", "cols", cols, 2048)
        kw.update(fc_kw)
        return args, kw
    return extra


def _norm_params(n_params):
    def extra(args, kw, rows, cols, dt):
        return args + tuple(_zeros((cols,), dt) for _ in range(n_params)), kw
    return extra


KERNELS: Dict[str, KernelSpec] = {k.name: k for k in (
    KernelSpec("matmul", "matmul:matmul_kernel", ("m", "k", "n"), 4, _matmul, DTYPES),
    KernelSpec("bmm", "matmul:matmul_kernel", ("batch", "m", "k", "n"), 4, _bmm, DTYPES),
    KernelSpec("attention", "attention:flash_fwd_kernel", ("q_len", "kv_len", "head_dim", "causal"), 3,
               _attention),
    KernelSpec("attention_decode", "attention_decode:decode_attention_kernel", ("heads", "rows", "kv_len", "head_dim"),
               1, _attention_decode),
    KernelSpec("rmsnorm", "norms:rmsnorm_kernel", ("rows", "cols"), 1, _rows("rmsnorm", 1, _norm_params(1))),
    KernelSpec("layernorm", "norms:layernorm_kernel", ("rows", "cols"), 1,
               _rows("layernorm", 1, _norm_params(2))),
    KernelSpec("softmax", "norms:softmax_kernel", ("rows", "cols"), 1, _rows("softmax", 1)),
    KernelSpec("add", "elementwise:binary_kernel", ("rows", "cols"), 1, _rows("add", 2, _stream({"op": "add"}))),
    KernelSpec("mul", "elementwise:binary_kernel", ("rows", "cols"), 1, _rows("mul", 2, _stream({"op": "mul"}))),
    KernelSpec("silu", "elementwise:activation_kernel", ("rows", "cols"), 1,
               _rows("silu", 1, _stream({"fn": "silu"}))),
    KernelSpec("gelu", "elementwise:activation_kernel", ("rows", "cols"), 1,
               _rows("gelu", 1, _stream({"fn": "gelu"}))),
    KernelSpec("swiglu", "elementwise:swiglu_kernel", ("rows", "cols"), 1, _rows("swiglu", 2, _stream({}))),
    KernelSpec("adamw", "elementwise:adamw_kernel", ("rows", "cols"), 1, _rows("adamw", 4, _stream({})),
               ("float32",)),
)}

VERSIONS: Dict[str, int] = {k: s.version for k, s in KERNELS.items()}


def spec(kernel: str) -> KernelSpec:
    """The spec of a reference kernel, or a ConfigError naming the known ones."""
    try:
        return KERNELS[kernel]
    except KeyError:
        raise ConfigError(f"unknown reference kernel {kernel!r}", rule="reference-kernel",
                          limit=sorted(KERNELS), value=kernel) from None
