"""``nki.compiler.frontend``: the compiler front ends (compile mode only; not simulated)."""
from ....errors import UnsupportedError


class _CompileOnly:
    def __init__(self, *a, **kw):
        raise UnsupportedError(f"nki.compiler.frontend.{type(self).__name__} needs the Neuron "
                               "compiler; trnsim simulates kernels instead (nki.simulate)",
                               rule="unsupported-api", value=type(self).__name__)


class NKIFrontend(_CompileOnly):
    """The NKI compiler front end (compile mode only; raises UnsupportedError)."""
    pass


class ParserFrontend(_CompileOnly):
    """The kernel parser front end (compile mode only; raises UnsupportedError)."""
    pass
