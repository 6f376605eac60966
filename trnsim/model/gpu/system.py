"""A GPU system (an EC2 GPU instance or a rack) as a ``model.system.SystemModel``: ranks are GPUs, the GPUs of
one NVLink domain consecutive; op costs are ``GpuOpCosts`` (roofline x efficiency factors re-fitted on
gpus.csv rows, their calibration inside the op costs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ...errors import ConfigError
from ..efficiency import Calibration
from ..precision import Precision, PrecisionError
from .costs import GpuOpCosts
from .serving_costs import GpuServingCosts
from .efficiency import estimator_figures, load_efficiency
from ...hardware.gpus import GpuCatalog, GpuSpec, GpuSystemSpec, load_gpu_catalog

# trnsim precision names -> (the GPU's tensor rate, the dtype the op graph writes for matmuls)
PRECISION_MAP = {"bf16": ("bf16", "bfloat16"), "fp8": ("fp8", "float8_e4m3"), "mxfp8": ("fp8", "float8_e4m3"),
                 "fp4": ("fp4", "mxfp4"), "mxfp4": ("fp4", "mxfp4")}
# bytes per stored weight at each GPU tensor rate (a fact of the format)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}


@dataclass(frozen=True)
class GpuSystem:
    """``nodes`` copies of one GPU system joined by its scale-out network; one rank per GPU."""
    spec: GpuSystemSpec
    gpu: GpuSpec
    catalog: GpuCatalog = field(repr=False, compare=False)
    figures: Mapping[str, float] = field(repr=False, compare=False)
    nodes: int = 1
    lnc: int = 1
    rank_name: str = "GPU"
    _costs: dict = field(default_factory=dict, repr=False, compare=False)   # op costs per format, reused

    @property
    def key(self) -> str:
        """The system's catalog key."""
        return self.spec.key

    @property
    def cores_per_node(self) -> int:
        """GPUs of one instance or rack."""
        return self.spec.gpus

    @property
    def cores(self) -> int:
        """GPUs of the whole system."""
        return self.spec.gpus * self.nodes

    @property
    def lncs(self) -> tuple:
        """One rank per GPU: LNC 1 only."""
        return (1,)

    @property
    def cores_per_chip(self) -> int:
        """One rank per GPU."""
        return 1

    @property
    def fast_domain(self) -> int:
        """GPUs of one NVLink domain."""
        return self.spec.nvlink_domain

    @property
    def hbm_bytes_per_core(self) -> float:
        """HBM of one GPU."""
        return float(self.gpu.hbm_bytes)

    @property
    def target(self) -> str:
        """The GPU's catalog key (h100-sxm, b200, ...)."""
        return self.gpu.key

    def usable_chip_bytes(self, reserved_per_rank: float) -> float:
        """HBM of one GPU less its runtime reserve."""
        return float(self.gpu.hbm_bytes) - reserved_per_rank

    def memory_overrides(self) -> Mapping[str, float]:
        """A GPU keeps its own runtime reserve (CUDA context, NCCL buffers) in place of a NeuronCore's."""
        return {"memory.reserved_bytes_per_core": self.figures["memory.reserved_bytes_per_gpu"]}

    def precision(self, name: str, sparsity: Optional[str] = None) -> Precision:
        """The GPU tensor rate of format ``name`` (an error where the GPU has none)."""
        p = (name or "bf16").lower()
        if p not in PRECISION_MAP:
            raise PrecisionError(f"unknown precision {name!r} for a GPU estimate", limit=sorted(PRECISION_MAP),
                                 value=name)
        if sparsity:
            raise PrecisionError(f"structured sparsity is not modelled on GPUs ({self.key})", rule="sparsity",
                                 limit="no --sparsity on a GPU system", value=sparsity)
        rate, dtype = PRECISION_MAP[p]
        self.gpu.peak_flops(rate)   # raises, naming the rates the GPU has
        return Precision(name=rate, op_dtype=dtype, weight_bytes=WEIGHT_BYTES[rate])

    def peak_flops_per_rank(self, prec: Precision) -> float:
        """Dense tensor peak of one GPU in ``prec``."""
        return self.gpu.peak_flops(prec.name)

    def op_costs(self, prec: Precision, training: bool,
                 efficiency: Optional[Mapping[str, float]] = None) -> GpuOpCosts:
        """Roofline x efficiency on one GPU; training uses the re-fitted op-level factors (the file's lumped
        factors hold the communication and bubbles the estimator adds itself)."""
        key = (prec.name, training, tuple(sorted((efficiency or {}).items())))
        if key in self._costs:
            return self._costs[key]
        eff = dict(efficiency or {})
        if training:
            table = load_efficiency(self.gpu.key)
            f = self.figures
            scale = f["training.matmul_fp8_scale"] if prec.name != "bf16" else f["training.matmul_bf16_scale"]
            if prec.name != "bf16":   # a GPU generation with its own fp8 rows has its own factor
                scale = f.get(f"training_fp8_scale_by_gpu.{self.gpu.key}", scale)
            eff.setdefault("matmul", min(1.0, table.matmul[prec.name] * scale))
            eff.setdefault("attention", min(1.0, table.attention[table.attention_precision]
                                            * f["training.matmul_bf16_scale"]))
            costs = GpuOpCosts(self.gpu.key, prec.name, efficiency=eff, catalog=self.catalog)
        else:   # serving costs each op by phase and shape (serving.toml); ``efficiency`` overrides its factors
            costs = GpuServingCosts(self.gpu.key, prec.name, overrides=eff, catalog=self.catalog)
        self._costs[key] = costs
        return costs

    def roofline(self, prec: Precision) -> None:
        """None: the GPU's efficiency factors live inside ``GpuOpCosts``."""
        return None

    def calibration(self, how: str, training: bool, efficiency: Optional[Mapping[str, float]] = None
                    ) -> Calibration:
        """No model-side factors (they are in the op costs); error bands and rows of the GPU estimator."""
        band = self.figures["training.error_band" if training else "inference.error_band"]
        bands = {"train": band, "ttft": band, "tpot": band}
        rows = ("P294", "P301", "P310") if training else ("P235", "P239", "P243", "P245", "P250", "found-2026-11b")
        note = ("GPU op costs: roofline x efficiency factors re-fitted on gpus.csv (model/gpu/data)" if training
                else "GPU serving op costs per generation, precision and phase (model/gpu/data/serving.toml), "
                     "fitted on published serving rows (bench/gpu_serving.py)")
        return Calibration(factors={}, bands=bands, rows=rows, note=note)

    def collectives(self, hardware_file: Optional[str] = None, simulate: bool = False):
        """trnsim.fabric over this system's GPUs with NCCL's runtime constants (launch cost, protocol by
        size): what ``trnsim collective`` prints."""
        from ...fabric import FabricComm
        return FabricComm(self.key, instances=self.nodes, lnc=1, hardware_file=hardware_file, simulate=simulate)


def is_gpu_system(key: str, hardware_file: Optional[str] = None) -> bool:
    """Whether ``key`` names a GPU system of the catalog (its key or an alias, any case)."""
    return load_gpu_catalog(user_file=hardware_file).has_system(key)


def gpu_system_names(hardware_file: Optional[str] = None) -> list:
    """The catalog keys of the GPU systems, sorted."""
    return sorted(load_gpu_catalog(user_file=hardware_file).systems)


def gpu_system(key: str, nodes: int = 1, hardware_file: Optional[str] = None,
               figures: Optional[Mapping[str, float]] = None) -> GpuSystem:
    """The GPU system ``key`` on ``nodes`` instances; ``figures`` override data/estimator.toml."""
    cat = load_gpu_catalog(user_file=hardware_file)
    spec = cat.system(key)
    return GpuSystem(spec=spec, gpu=cat.gpus[spec.gpu], catalog=cat, figures=estimator_figures(figures),
                     nodes=int(nodes))
