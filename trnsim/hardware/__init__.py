"""Hardware catalog: every figure lives in a data file under ``data/`` with its source."""
from .catalog import Catalog, get_chip, get_core, load_catalog
from .gpus import GpuCatalog, GpuSpec, GpuSystemSpec, load_gpu_catalog
from .schema import ChipSpec, CoreSpec, OnChipMemory, TensorEngineRules, TileSizes

__all__ = ["Catalog", "ChipSpec", "CoreSpec", "GpuCatalog", "GpuSpec", "GpuSystemSpec", "OnChipMemory",
           "TensorEngineRules", "TileSizes", "get_chip", "get_core", "load_catalog", "load_gpu_catalog"]
