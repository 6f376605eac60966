"""trnsim: a software Trainium. Run, profile and cost NKI kernels and models without the hardware."""
__version__ = "0.1.0"

from .errors import TrnsimError  # noqa: E402
from .options import Options  # noqa: E402

from .api import load_kernel, make_inputs, summarize, time_kernel, trace, trace_all  # noqa: E402

__all__ = ["TrnsimError", "Options", "trace", "trace_all", "load_kernel", "make_inputs",
           "time_kernel", "summarize", "estimate_training", "estimate_inference", "__version__"]

# model-level estimates load on first use, so `import trnsim` (and every kernel run) stays light
_LAZY = {"estimate_training": ".model.train", "estimate_inference": ".model.infer"}


def __getattr__(name):
    """``trnsim.estimate_training`` / ``trnsim.estimate_inference``, imported on first use."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'trnsim' has no attribute {name!r}")
