"""The seam between the model estimator and per-op costs: ``Op``, ``OpTime`` and the ``OpCosts`` protocol.

The estimator builds ``Op`` records (shapes already divided by the parallelism) and asks any ``OpCosts``
for their time on one NeuronCore. ``RooflineOpCosts`` is the catalog-only fallback; the simulated table
lives in ``trnsim.model.opcost``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, runtime_checkable

from ..errors import ConfigError
from ..hardware.schema import ChipSpec, CoreSpec

OP_KINDS = ("matmul", "attention", "norm", "softmax", "elementwise", "embedding", "optimizer")


@dataclass(frozen=True)
class Op:
    """One costed operation per NeuronCore (shapes already divided by the parallelism)."""
    kind: str            # "matmul" | "attention" | "norm" | "softmax" | "elementwise" | "embedding" | "optimizer"
    name: str            # e.g. "L0.attn.qkv" (or a template name shared by all layers)
    dtype: str = "bfloat16"
    m: int = 0
    k: int = 0
    n: int = 0                              # matmul [m,k] x [k,n]
    batch: int = 1                          # independent repeats (heads, experts, micro-steps)
    rows: int = 0
    cols: int = 0                           # norm / softmax / elementwise / embedding / optimizer
    q_len: int = 0
    kv_len: int = 0
    head_dim: int = 0
    heads: int = 0                          # query heads (x sequences, as the builders count them)
    causal: bool = False                    # attention
    kv_heads: int = 0                       # KV heads, counted like heads (0: as many as heads, MHA)
    flops: float = 0.0   # hand-formula FLOPs of the whole op (all batch repeats)
    bytes: float = 0.0   # HBM bytes moved (all batch repeats)


@dataclass(frozen=True)
class OpTime:
    """Time of one ``Op`` and how it was obtained."""
    seconds: float       # on one NeuronCore (a logical one when LNC=2), all batch repeats included
    how: str             # "simulated" | "interpolated" | "roofline"


@runtime_checkable
class OpCosts(Protocol):
    """Anything that can time an ``Op`` on one (logical) NeuronCore."""
    def time(self, op: Op) -> OpTime:
        """Time of ``op`` on one (logical) NeuronCore."""
        ...


# Matmul dtype -> which TensorE rate applies.  The names are the ones the estimator puts in Op.dtype.
_RATE_OF_DTYPE = {
    "bfloat16": "bf16", "float16": "bf16", "tfloat32": "bf16",
    "float8_e4m3": "fp8", "float8_e5m2": "fp8", "float8_e4m3fn": "fp8", "fp8": "fp8",
    "mxfp8": "mx", "mxfp4": "mx",
    "float32": "fp32",
}


def tensor_peak_flops(core: CoreSpec, dtype: str = "bfloat16", lnc: int = 1) -> float:
    """Dense TensorE FLOP/s of one (logical) core for a matmul dtype, derived from the core's clock,
    PE array and speed-ups in cores.toml (hardware.md 2.1: 128 x 128 x 2 x clock x packing)."""
    rate = _RATE_OF_DTYPE.get(dtype)
    if rate is None:
        raise ConfigError(f"unknown matmul dtype {dtype!r}", rule="dtype", limit=sorted(_RATE_OF_DTYPE),
                          value=dtype)
    t = core.timing.tensor
    base = core.tensor.max_contraction * core.tensor.max_stationary_free * 2 * core.clocks.tensor_hz
    if rate == "fp8":
        # v3 doubles FP8 through double_row; on v2 the speed-up is 1 (cFP8 at BF16 rate)
        base *= t.fp8_speedup if not core.tensor.double_row else max(t.fp8_speedup, t.double_row_speedup)
    elif rate == "mx":
        if not core.tensor.mx:
            raise ConfigError(f"{core.name} has no MX (microscaling) matmul", rule="precision",
                              limit="mxfp8/mxfp4 need a core with MX support (trn3)", value=dtype)
        base *= t.mx_speedup
    elif rate == "fp32":
        base /= max(t.fp32_passes, 1)
    return base * lnc


def vector_elems_per_s(core: CoreSpec, lnc: int = 1) -> float:
    """Elements per second of the Vector engine of one (logical) core: elements per partition per
    cycle x partitions (lanes) x clock."""
    return core.timing.vector.elems_per_cycle * core.sbuf.partitions * core.clocks.vector_hz * lnc


class RooflineOpCosts:
    """Roofline time per op: max(FLOPs / TensorE peak, bytes / HBM share) on one (logical) core.

    Non-matmul ops are bounded by the Vector engine's element rate instead of TensorE.
    ``sparse_speedup`` > 1 applies an M:N structured-sparsity rate to matmuls.
    """

    def __init__(self, core_spec: CoreSpec, chip_spec: ChipSpec, lnc: int = 1,
                 sparse_speedup: float = 1.0):
        if lnc not in core_spec.lnc:
            raise ConfigError(f"LNC={lnc} is not available on {core_spec.name}", rule="lnc",
                              limit=list(core_spec.lnc), value=lnc)
        self.core = core_spec
        self.chip = chip_spec
        self.lnc = lnc
        self.sparse_speedup = sparse_speedup
        self.hbm_bytes_per_s = chip_spec.hbm_bandwidth_bytes_per_s / chip_spec.cores * lnc
        self._vec = vector_elems_per_s(core_spec, lnc)
        self._peak = {}

    def peak(self, dtype: str) -> float:
        """TensorE FLOP/s for ``dtype`` on this (logical) core."""
        if dtype not in self._peak:
            self._peak[dtype] = tensor_peak_flops(self.core, dtype, self.lnc)
        return self._peak[dtype]

    def time(self, op: Op) -> OpTime:
        """Roofline seconds of ``op`` (all batch repeats)."""
        mem = op.bytes / self.hbm_bytes_per_s
        if op.kind in ("matmul", "attention"):
            comp = op.flops / (self.peak(op.dtype) * (self.sparse_speedup if op.kind == "matmul" else 1.0))
        else:
            elems = op.rows * op.cols * op.batch if op.rows and op.cols else op.flops
            comp = elems / self._vec
        return OpTime(seconds=max(comp, mem), how="roofline")


def roofline_for(target: str = "trn2", lnc: Optional[int] = None) -> RooflineOpCosts:
    """A RooflineOpCosts for trn1/trn2/trn3 from the built-in catalog (LNC defaults to the largest)."""
    from ..hardware import get_chip, get_core
    core = get_core(target)
    return RooflineOpCosts(core, get_chip(target), lnc if lnc is not None else max(core.lnc))
