"""Which reference kernel stands for an ``Op``, at which shape, how many times, on one physical core.

With LNC=2 a logical core is two physical cores that split the op: the repeats (heads, experts,
sequences) when there are at least two, else the widest parallel dimension.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

from ...errors import ConfigError
from ..ops import Op

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
        m, n = op.m, op.n
        if lnc > 1:
            if reps >= lnc:
                reps = _split(reps, lnc)
            elif n >= m:
                n = _split(n, lnc)
            else:
                m = _split(m, lnc)
        return KernelCall("matmul", {"m": m, "k": op.k, "n": n}, dt, reps)
    dt = STREAM_DTYPES.get(op.dtype, "bfloat16")
    if op.kind == "attention":
        _need(op, "q_len", "kv_len", "head_dim")
        # one call per query head: nki-library attention_cte also runs a batch item per query head and
        # loads its KV head's K/V each time (GQA shares the HBM copy, not the SBUF load)
        reps = reps * max(1, op.heads)
        q = op.q_len
        if lnc > 1:
            if reps >= lnc:
                reps = _split(reps, lnc)
            else:
                q = _split(q, lnc)
        return KernelCall("attention", {"q_len": q, "kv_len": op.kv_len, "head_dim": op.head_dim,
                                        "causal": int(bool(op.causal))}, "bfloat16", reps)
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
