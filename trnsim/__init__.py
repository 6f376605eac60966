"""trnsim: a software Trainium. Run, profile and cost NKI kernels and models without the hardware."""
__version__ = "0.1.0"

from .errors import TrnsimError  # noqa: E402
from .options import Options  # noqa: E402

from .api import load_kernel, make_inputs, time_kernel, trace, trace_all  # noqa: E402

__all__ = ["TrnsimError", "Options", "trace", "trace_all", "load_kernel", "make_inputs",
           "time_kernel", "__version__"]
