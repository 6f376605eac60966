"""``GpuServingCosts``: op costs of GPU serving per generation, precision and phase (``data/serving.toml``).

Training keeps the lumped step factors of ``efficiency.toml``; serving costs each op from its shape: a matmul's
efficiency grows with its rows (prefill GEMMs reach the large-GEMM factor, decode's GEMV-like matmuls stream
their weights from HBM), prefill attention is compute-bound, decode attention reads the KV cache.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional

from ...errors import ConfigError, HardwareFileError
from ...hardware.figures import Figure, read_toml, unwrap_figures
from ...hardware.gpus import GpuCatalog, load_gpu_catalog
from ..ops import OP_KINDS, Op, OpTime
from .costs import op_bytes, op_flops
from .efficiency import load_efficiency

SERVING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "serving.toml")
FACTORS = ("gemm_bf16", "gemm_fp8", "gemm_fp4", "hbm", "attention_prefill", "attention_decode_hbm")


@dataclass(frozen=True)
class ServingFactors:
    """One GPU's serving factors (shares of peak), the GEMM half-efficiency rows and the per-kernel cost."""
    gpu: str
    factors: Mapping[str, float]
    m_half: float
    kernel_s: float
    provenance: Mapping[str, Figure] = field(default_factory=dict, compare=False, repr=False)


def load_serving_factors(gpu: str, path: Optional[str] = None,
                         overrides: Optional[Mapping[str, float]] = None) -> ServingFactors:
    """The factors of ``gpu`` ([default] merged with [gpu.<key>], then ``overrides``)."""
    file = os.path.abspath(path) if path else SERVING_FILE
    prov: Dict[str, Figure] = {}
    vals = unwrap_figures(read_toml(file, "data-file"), "", file, prov)
    merged = {**vals.get("default", {}), **vals.get("gpu", {}).get(gpu, {}), **(overrides or {})}
    bad = set(merged) - set(FACTORS) - {"m_half", "kernel_s"}
    if bad:
        raise ConfigError(f"unknown serving factor {sorted(bad)}", rule="serving-factor",
                          limit=FACTORS + ("m_half", "kernel_s"), value=sorted(bad))
    for k in FACTORS:
        v = merged.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise HardwareFileError(f"{file}: serving factor {k} of {gpu} must be in (0, 1]",
                                    rule="data-file-range", limit="(0, 1]", value=v)
    for k in ("m_half", "kernel_s"):
        if not isinstance(merged.get(k), (int, float)) or merged[k] < 0:
            raise HardwareFileError(f"{file}: {k} must be a number >= 0", rule="data-file-range", limit=">= 0",
                                    value=merged.get(k))
    return ServingFactors(gpu=gpu, factors={k: float(merged[k]) for k in FACTORS}, m_half=float(merged["m_half"]),
                          kernel_s=float(merged["kernel_s"]), provenance=prov)


def gemm_efficiency(peak_factor: float, m: int, m_half: float) -> float:
    """Share of peak a GEMM of ``m`` rows reaches: peak_factor x m / (m + m_half)."""
    m = max(int(m), 1)
    return peak_factor * m / (m + m_half)


class GpuServingCosts:
    """Seconds of an ``Op`` on one GPU of ``gpu_key`` when serving at matmul ``precision`` (bf16 | fp8 | fp4)."""

    def __init__(self, gpu_key: str, precision: str = "bf16", overrides: Optional[Mapping[str, float]] = None,
                 catalog: Optional[GpuCatalog] = None, path: Optional[str] = None):
        cat = catalog or load_gpu_catalog()
        self.gpu = cat.gpu(gpu_key)
        self.precision = precision
        self.matmul_peak = self.gpu.peak_flops(precision)    # raises if the GPU lacks the precision
        self.bf16_peak = self.gpu.peak_flops("bf16")
        self.sf = load_serving_factors(self.gpu.key, path, overrides)
        self.passes = load_efficiency(self.gpu.key).passes
        self.hbm = self.gpu.hbm_bandwidth_bytes_per_s

    def bound(self, op: Op) -> str:
        """"memory" where the op's HBM bytes take longer than its FLOPs on this GPU, else "compute"."""
        comp, mem = self._times(op)
        return "memory" if mem >= comp else "compute"

    def _times(self, op: Op) -> tuple:
        """(compute seconds, memory seconds) of ``op``."""
        f = self.sf.factors
        byts = op_bytes(op, self.passes)
        if op.kind == "matmul":
            eff = gemm_efficiency(f[f"gemm_{self.precision}"], op.m, self.sf.m_half)
            return op_flops(op) / (self.matmul_peak * eff), byts / (self.hbm * f["hbm"])
        if op.kind == "attention":
            # decode reads the KV cache; an absorbed MLA latent shared by all heads makes it compute-bound too
            bw = f["hbm"] if op.q_len > 1 else f["attention_decode_hbm"]
            return op_flops(op) / (self.bf16_peak * f["attention_prefill"]), byts / (self.hbm * bw)
        return 0.0, byts / (self.hbm * f["hbm"])

    def time(self, op: Op) -> OpTime:
        """Seconds of ``op`` on one GPU, all batch repeats included (``how="serving-roofline"``)."""
        if op.kind not in OP_KINDS:
            raise ConfigError(f"unknown op kind {op.kind!r} in {op.name}", rule="op-kind", limit=OP_KINDS,
                              value=op.kind)
        t = max(self._times(op))
        return OpTime(seconds=t + self.sf.kernel_s, how="serving-roofline")
