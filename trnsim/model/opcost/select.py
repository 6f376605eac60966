"""Which reference kernels stand for an ``Op``, at which shapes, how many times, on one physical core.

With LNC=2 a logical core is two physical cores that split the op: the repeats (heads, experts,
sequences) when there are at least two, else the widest parallel dimension.  Attention has two
implementations (``IMPLS``): "fused" (the NKI kernels the serving stacks use: the decode kernel for
a few new tokens, the flash kernel above) and "unfused" (the eager fallback: matmul, softmax and
matmul with the scores in HBM); data/attention.toml holds the choices behind both.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Mapping, Optional, Union

from ...errors import ConfigError
from ...hardware.figures import read_toml, unwrap_figures
from ..ops import Op

ATTENTION_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "attention.toml")
IMPLS = ("fused", "unfused")

# Op.dtype spellings -> the dtype the reference kernel runs in; None = no reference kernel
# (MX formats need trn3's nc_matmul_mx, not written yet: those matmuls use the fallback costs)
MATMUL_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "bfloat16", "fp16": "bfloat16",
    "tfloat32": "float32", "float32": "float32", "fp32": "float32",
    "float8_e4m3": "float8_e4m3", "float8_e5m2": "float8_e4m3", "float8_e4m3fn": "float8_e4m3",
    "fp8": "float8_e4m3", "mxfp8": None, "mxfp4": None,
}
# non-matmul kernels stream activations in bf16 (fp32 ops are timed in fp32)
STREAM_DTYPES = {"float32": "float32", "fp32": "float32"}


@dataclass(frozen=True)
class KernelCall:
    """One reference-kernel shape standing for an op: time(op) = repeats x time(kernel, shape)."""
    kernel: str
    shape: Dict[str, int]
    dtype: str
    repeats: float


def _need(op: Op, *fields: str) -> None:
    for f in fields:
        if getattr(op, f) <= 0:
            raise ConfigError(f"op {op.name!r} ({op.kind}) needs {f} > 0", rule="opcost-shape",
                              limit="> 0", value=getattr(op, f))


def _split(n: int, lnc: int) -> int:
    return max(1, math.ceil(n / lnc))


def _plain(table: Mapping, file: str) -> Dict:
    """A settings table with each {value, source} figure replaced by its value (figures checked)."""
    return unwrap_figures(table, "", file, {}, rule="data-file")


@lru_cache(maxsize=1)
def _default_attention() -> Dict:
    return _plain(read_toml(ATTENTION_FILE), ATTENTION_FILE)


def attention_settings(source: Union[None, str, Mapping] = None) -> Dict:
    """data/attention.toml (figures unwrapped), with a TOML path / dict of the same layout merged over it."""
    out = {k: dict(v) for k, v in _default_attention().items()}
    if source is not None:
        raw = _plain(read_toml(source) if isinstance(source, str) else source,
                     source if isinstance(source, str) else "attention overrides")
        for k, v in raw.items():
            out.setdefault(k, {}).update(v)
    return out


def _matmul_call(m: int, k: int, n: int, dt: str, reps: int, lnc: int) -> KernelCall:
    """A matmul's call on one physical core: LNC splits the repeats, else the wider of m and n."""
    if lnc > 1:
        if reps >= lnc:
            reps = _split(reps, lnc)
        elif n >= m:
            n = _split(n, lnc)
        else:
            m = _split(m, lnc)
    return KernelCall("matmul", {"m": m, "k": k, "n": n}, dt, reps)


def elementwise_kernel(name: str) -> str:
    """The elementwise reference kernel an op name asks for (swiglu, silu, gelu, mul; else add)."""
    low = name.lower()
    for word, kernel in (("swiglu", "swiglu"), ("silu", "silu"), ("gelu", "gelu"),
                         ("act", "silu"), ("mul", "mul")):
        if word in low:
            return kernel
    return "add"


def kernel_call(op: Op, lnc: int = 1) -> Optional[KernelCall]:
    """The reference kernel call for ``op`` on one physical core; None where no kernel exists
    (embedding gathers, MX matmuls): the caller uses its fallback costs."""
    reps = max(1, op.batch)
    if op.kind == "matmul":
        _need(op, "m", "k", "n")
        if op.dtype not in MATMUL_DTYPES:
            raise ConfigError(f"unknown matmul dtype {op.dtype!r}", rule="dtype",
                              limit=sorted(MATMUL_DTYPES), value=op.dtype)
        dt = MATMUL_DTYPES[op.dtype]
        if dt is None:
            return None
        return _matmul_call(op.m, op.k, op.n, dt, reps, lnc)
    dt = STREAM_DTYPES.get(op.dtype, "bfloat16")
    if op.kind == "attention":
        calls = attention_calls(op, lnc)
        return calls[0] if len(calls) == 1 else None
    if op.kind in ("norm", "softmax", "elementwise", "optimizer"):
        _need(op, "rows", "cols")
        if op.kind == "norm":
            low = op.name.lower()
            kernel = "layernorm" if ("layernorm" in low or "layer_norm" in low) else "rmsnorm"
        elif op.kind == "softmax":
            kernel = "softmax"
        elif op.kind == "optimizer":
            kernel, dt = "adamw", "float32"
        else:
            kernel = elementwise_kernel(op.name)
        rows = op.rows
        if lnc > 1:
            if reps >= lnc:
                reps = _split(reps, lnc)
            else:
                rows = _split(rows, lnc)
        return KernelCall(kernel, {"rows": rows, "cols": op.cols}, dt, reps)
    if op.kind == "embedding":
        return None
    raise ConfigError(f"unknown op kind {op.kind!r}", rule="op-kind",
                      limit=["matmul", "attention", "norm", "softmax", "elementwise", "embedding",
                             "optimizer"], value=op.kind)


def kernel_calls(op: Op, lnc: int = 1, attention_impl: str = "fused",
                 attention: Optional[Mapping] = None) -> List[KernelCall]:
    """Every reference kernel call that makes up ``op`` on one physical core (time = the sum of
    repeats x kernel time); empty where no kernel exists (the caller uses its fallback costs)."""
    if op.kind == "attention":
        return attention_calls(op, lnc, attention_impl, attention)
    call = kernel_call(op, lnc)
    return [] if call is None else [call]


def _groups(op: Op):
    """(query heads, KV heads, query heads per KV head), sequences included.  Where the heads do not
    split evenly over the KV heads (a TP rank holding padded heads) every KV head is costed with the
    largest group; more KV heads than query heads (KV replicated over ranks) counts one per query head."""
    heads = max(1, op.heads) * max(1, op.batch)
    kvh = min(heads, op.kv_heads * max(1, op.batch)) if op.kv_heads > 0 else heads
    return heads, kvh, math.ceil(heads / kvh)


def attention_calls(op: Op, lnc: int = 1, impl: str = "fused",
                    attention: Optional[Mapping] = None) -> List[KernelCall]:
    """The kernel calls of an attention op in implementation ``impl`` ("fused" | "unfused")."""
    if impl not in IMPLS:
        raise ConfigError(f"unknown attention implementation {impl!r}", rule="attention-impl",
                          limit=list(IMPLS), value=impl)
    _need(op, "q_len", "kv_len", "head_dim")
    cfg = attention_settings(attention)
    heads, kvh, group = _groups(op)
    q, kv, d = op.q_len, op.kv_len, op.head_dim
    if impl == "unfused":
        return _unfused_calls(op, cfg["unfused"], heads, kvh, group, lnc)
    if q <= int(cfg["decode"]["max_q_len"]):
        # one pass over each KV head's cache for all of its group's query rows
        rows = group * q
        splits = math.ceil(rows / int(cfg["decode"]["max_rows"]))
        rows, passes = math.ceil(rows / splits), kvh * splits
        parts = math.ceil(kv / int(cfg["decode"]["max_kv_len"]))  # SBUF holds a pass's K and V
        kv, passes = math.ceil(kv / parts / 128) * 128 if parts > 1 else kv, passes * parts
        if lnc > 1:
            if passes >= lnc:
                passes = _split(passes, lnc)
            else:  # one KV head: the cores split its cache (the library's sequence sharding)
                kv = _split(kv, lnc)
        # one kernel call for all the passes, as the library's kernel loops over its batch: one
        # pass's loads overlap another's compute
        return [KernelCall("attention_decode", {"heads": passes, "rows": rows, "kv_len": kv, "head_dim": d},
                           "bfloat16", 1)]
    # prefill: one call per query head: nki-library attention_cte also runs a batch item per query
    # head and loads its KV head's K/V each time (GQA shares the HBM copy, not the SBUF load)
    reps = heads
    if lnc > 1:
        if reps >= lnc:
            reps = _split(reps, lnc)
        else:
            q = _split(q, lnc)
    return [KernelCall("attention", {"q_len": q, "kv_len": kv, "head_dim": d,
                                     "causal": int(bool(op.causal))}, "bfloat16", reps)]


def _unfused_calls(op: Op, cfg: Mapping, heads: int, kvh: int, group: int, lnc: int) -> List[KernelCall]:
    """scores = Q K^T, [mask add], softmax, P V: each its own kernel with its result in HBM; the two
    matmuls are batched ones (one kernel over every sequence x KV head, as the framework issues them)."""
    dt = str(cfg["dtype"])
    if dt not in MATMUL_DTYPES or MATMUL_DTYPES[dt] is None:
        raise ConfigError(f"unfused attention dtype {dt!r} has no reference matmul", rule="dtype",
                          limit=sorted(k for k, v in MATMUL_DTYPES.items() if v), value=dt)
    dt = MATMUL_DTYPES[dt]
    if cfg["gqa"] not in ("grouped", "per_head"):
        raise ConfigError(f"unfused attention gqa {cfg['gqa']!r}", rule="attention-gqa",
                          limit=["grouped", "per_head"], value=cfg["gqa"])
    m, reps = (group * op.q_len, kvh) if cfg["gqa"] == "grouped" else (op.q_len, heads)
    q, kv, d = op.q_len, op.kv_len, op.head_dim
    rows = _split(heads * q, lnc)  # score rows on one physical core
    sdt = STREAM_DTYPES.get(dt, "bfloat16")
    calls = [_bmm_call(m, d, kv, dt, reps, lnc)]
    if op.causal:
        calls.append(KernelCall("add", {"rows": rows, "cols": kv}, sdt, 1))
    calls.append(KernelCall("softmax", {"rows": rows, "cols": kv}, sdt, 1))
    calls.append(_bmm_call(m, kv, d, dt, reps, lnc))
    return calls


def _bmm_call(m: int, k: int, n: int, dt: str, reps: int, lnc: int) -> KernelCall:
    """A batched matmul (one framework op over ``reps`` independent products) as one call of the
    batched reference kernel, its batch split over the LNC cores (else the wider of m and n)."""
    call = _matmul_call(m, k, n, dt, reps, lnc)
    return KernelCall("bmm", dict(call.shape, batch=int(call.repeats)), dt, 1)
