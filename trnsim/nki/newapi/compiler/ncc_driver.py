"""``nki.compiler.ncc_driver``: the compile driver (compile mode only; not simulated)."""
from .frontend import _CompileOnly


class CompiledKernel(_CompileOnly):
    pass


class CompileOptions(_CompileOnly):
    pass
