"""``nki`` (NKI >= 0.2): ``jit``, ``simulate``/``cpu_simulate``, ``kernel[lnc]`` launches, and the
submodules ``language``, ``isa`` (+ ``isa.constants``), ``typing``, ``compiler``, ``collectives``,
``tensor``, ``dtype``, ``builtin``.

``trnsim.compat.install()`` (or ``trnsim exec``) serves this package as ``nki`` and as
``nki_cpu_simulator.nki`` (the name nki-library's simulation harness imports), with every name in
``SUBMODULES`` aliased as ``nki.<sub>``.
"""
from __future__ import annotations

import warnings
from typing import Any


SUBMODULES = ("language", "language.dtypes", "isa", "isa.constants", "typing", "compiler",
              "compiler.frontend", "compiler.ncc_driver", "collectives", "tensor", "dtype",
              "builtin")

__version__ = "0.6.0+trnsim"


from .launch import Kernel, _as_kernel, _Simulated, cpu_simulate, jit, simulate  # noqa: F401




from . import builtin, collectives, compiler, dtype, isa, language, tensor, typing  # noqa: E402,F401
from .isa import VirtualRegister  # noqa: E402,F401


def __getattr__(name: str) -> Any:
    if name == "benchmark" or name == "profile" or name == "baremetal":
        warnings.warn(f"nki.{name} is a device-only entry point; trnsim runs the kernel on the "
                      "simulated core", stacklevel=2)
        from .. import nki_legacy as legacy
        return getattr(legacy, name)
    raise AttributeError(f"module 'nki' has no attribute {name!r}")
