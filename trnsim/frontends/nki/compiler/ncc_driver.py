"""``nki.compiler.ncc_driver``: the compile driver (compile mode only; not simulated)."""
from .frontend import _CompileOnly


class CompiledKernel(_CompileOnly):
    """A compiled kernel (compile mode only; raises UnsupportedError)."""
    pass


class CompileOptions(_CompileOnly):
    """Compiler options (compile mode only; raises UnsupportedError)."""
    pass
