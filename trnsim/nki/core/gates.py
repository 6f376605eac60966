"""Generation gates: one check of an instruction or feature against the opcode registry.

Every gate has the rule name "generation" (limit ``gen<N>+``, value ``gen<target's>``); the lowest
generation of each opcode and feature is data in ``trnsim/ir/opcodes.py``, the target's generation
is data in the hardware files, so a what-if core of a new generation needs no code here.
"""
from __future__ import annotations

import numpy as np

from ...errors import DtypeError
from ...ir import opcodes
from ...source import describe, user_loc
from . import dtypes as dt

# host-side widths NKI narrows to 32 bit on the way in (DT), so no core needs to support them
_HOST_ONLY = frozenset(["float64", "int64", "uint64"])


def require(ctx, name: str) -> None:
    """Raise GenerationError (rule "generation") unless the target core's generation has ``name``
    (an opcode, or a feature key such as "matmul.double_row", "nl.abs_max", "dtype.<name>")."""
    gen = ctx.spec.generation
    if gen < opcodes.min_generation(name):
        opcodes.require_generation(name, gen, target=ctx.options.target,
                                   where=describe(user_loc()))


def check_dtype_supported(ctx, d: np.dtype) -> None:
    """Raise unless the target core has dtype ``d``: its generation gate (registry feature
    ``dtype.<name>``), then the core's own ``dtypes`` list in the hardware data."""
    ok = ctx.dtypes_ok  # checked once per kernel instance: ops pass dtype= on every call
    if d in ok:
        return
    n = dt.name(d)
    if n not in _HOST_ONLY:
        key = "dtype." + n
        if key in opcodes.FEATURES:
            require(ctx, key)
        if n not in ctx.spec.dtypes:
            raise DtypeError(f"dtype {n} is not supported on {ctx.spec.name} "
                             f"({ctx.options.target})", rule="dtype-supported",
                             limit=", ".join(ctx.spec.dtypes), value=n, where=describe(user_loc()))
    ok.add(d)
