"""GPU systems as data and the GPU op-cost model (roofline with calibrated efficiency factors)."""
from .costs import GpuOpCosts
from .systems import GpuCatalog, GpuSpec, GpuSystemSpec, load_gpu_catalog

__all__ = ["GpuOpCosts", "GpuCatalog", "GpuSpec", "GpuSystemSpec", "load_gpu_catalog"]
