"""GPU systems in the model layer: ``GpuSystem`` (the system protocol over the catalog's GPU systems) and the
GPU op-cost model (roofline with calibrated efficiency factors)."""
from .costs import GpuOpCosts
from .system import GpuSystem, gpu_system

__all__ = ["GpuOpCosts", "GpuSystem", "gpu_system"]
