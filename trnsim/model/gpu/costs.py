"""``GpuOpCosts``: the GPU side of the op-cost seam, a roofline with stated, calibrated efficiency factors.

time(op) = max(FLOPs / (dense peak x efficiency), bytes / (HBM bandwidth x memory efficiency)) + a fixed
per-kernel overhead.  Matmuls run at the chosen precision, attention at ``attention.precision`` of
efficiency.toml (bf16: fused attention stays bf16 in the published fp8 recipes), norm / softmax /
elementwise / embedding / optimizer ops are memory-bound (their arithmetic intensity is far below any
GPU's ridge point), so only their bytes count.  Times are per GPU.
"""
from __future__ import annotations

from typing import Mapping, Optional

from ...errors import ConfigError
from ..ops import OP_KINDS, Op, OpTime
from .efficiency import MEMORY_KINDS, EfficiencyTable, load_efficiency
from ...hardware.gpus import GpuCatalog, load_gpu_catalog

# Storage bytes per element of the dtype names the estimator writes in Op.dtype (a fact of the format).
ITEMSIZE = {
    "float32": 4.0, "tfloat32": 4.0, "bfloat16": 2.0, "float16": 2.0,
    "float8_e4m3": 1.0, "float8_e5m2": 1.0, "float8_e4m3fn": 1.0, "fp8": 1.0, "mxfp8": 1.0,
    "mxfp4": 0.5, "nvfp4": 0.5, "fp4": 0.5,
}


def itemsize(dtype: str) -> float:
    """Bytes per element of ``dtype``; an unknown dtype is a ConfigError naming it."""
    try:
        return ITEMSIZE[dtype]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}", rule="dtype", limit=sorted(ITEMSIZE),
                          value=dtype) from None


def op_flops(op: Op) -> float:
    """FLOPs of ``op``: its own figure, else 2mkn (matmul) or 4 q kv d h (attention, halved if causal)."""
    if op.flops:
        return float(op.flops)
    if op.kind == "matmul":
        return 2.0 * op.m * op.k * op.n * op.batch
    if op.kind == "attention":
        f = 4.0 * op.q_len * op.kv_len * op.head_dim * max(op.heads, 1) * op.batch
        return f * (0.5 if op.causal else 1.0)
    return 0.0


def op_bytes(op: Op, passes: Mapping[str, float]) -> float:
    """HBM bytes of ``op``: its own figure, else operands read once and results written once
    (memory-bound kinds: rows x cols x passes[kind] elements)."""
    if op.bytes:
        return float(op.bytes)
    size = itemsize(op.dtype)
    if op.kind == "matmul":
        return (op.m * op.k + op.k * op.n + op.m * op.n) * size * op.batch
    if op.kind == "attention":  # Q read, O written, K and V read once (a fused kernel)
        return (2 * op.q_len + 2 * op.kv_len) * op.head_dim * max(op.heads, 1) * size * op.batch
    return op.rows * op.cols * op.batch * size * passes[op.kind]


class GpuOpCosts:
    """Roofline time of an ``Op`` on one GPU of ``gpu_key`` at matmul ``precision`` (bf16 | fp8 | fp4).

    ``efficiency`` overrides the file's factors for this GPU: ``{"matmul": 0.6, "attention": 0.5,
    "memory": 0.9, "kernel_overhead_s": 0}``.
    """

    def __init__(self, gpu_key: str, precision: str = "bf16", efficiency: Optional[Mapping[str, float]] = None,
                 catalog: Optional[GpuCatalog] = None, efficiency_file: Optional[str] = None):
        cat = catalog or load_gpu_catalog()
        self.gpu = cat.gpu(gpu_key)
        self.precision = precision
        self.matmul_peak = self.gpu.peak_flops(precision)  # raises if the GPU lacks the precision
        table = load_efficiency(self.gpu.key, efficiency_file).with_overrides(efficiency, precision)
        for cls, prec in (("matmul", precision), ("attention", table.attention_precision)):
            if prec not in getattr(table, cls):
                raise ConfigError(f"no {cls} efficiency for {prec} on {self.gpu.key}", rule="efficiency",
                                  limit=sorted(getattr(table, cls)), value=prec,
                                  hint=f"add {cls}.{prec} to efficiency.toml or pass efficiency={{'{cls}': x}}")
        self.table: EfficiencyTable = table
        self.attention_peak = self.gpu.peak_flops(table.attention_precision)
        self.hbm_bytes_per_s = self.gpu.hbm_bandwidth_bytes_per_s * table.memory

    def achieved_flops(self, kind: str) -> float:
        """Calibrated FLOP/s of a matmul or attention op on this GPU (peak x efficiency)."""
        if kind == "matmul":
            return self.matmul_peak * self.table.matmul[self.precision]
        if kind == "attention":
            return self.attention_peak * self.table.attention[self.table.attention_precision]
        raise ConfigError(f"{kind} ops are memory-bound here", rule="op-kind", limit=("matmul", "attention"),
                          value=kind)

    def bound(self, op: Op) -> str:
        """"memory" where the op's HBM bytes take longer than its FLOPs on this GPU, else "compute"."""
        if op.kind in MEMORY_KINDS:
            return "memory"
        mem = op_bytes(op, self.table.passes) / self.hbm_bytes_per_s
        return "memory" if mem >= op_flops(op) / self.achieved_flops(op.kind) else "compute"

    def time(self, op: Op) -> OpTime:
        """Seconds of ``op`` on one GPU, all batch repeats included (``how="roofline"``)."""
        if op.kind not in OP_KINDS:
            raise ConfigError(f"unknown op kind {op.kind!r} in {op.name}", rule="op-kind", limit=OP_KINDS,
                              value=op.kind)
        mem = op_bytes(op, self.table.passes) / self.hbm_bytes_per_s
        if op.kind in MEMORY_KINDS:
            comp = 0.0
        else:
            comp = op_flops(op) / self.achieved_flops(op.kind)
        return OpTime(seconds=max(comp, mem) + self.table.kernel_overhead_s, how="roofline")
