"""``nki.isa`` (NKI >= 0.2): every instruction takes ``dst`` first, writes it in place and returns an
``NkiInstruction`` handle (``.depends_on(...)`` orders it after other instructions).

Enum parameters must be members of the enums below (plain integers are rejected, as in NKI >= 0.3);
``mask=`` no longer exists.  The instruction wrappers are generated from the signature table
(``isa/table.py``): parameters, defaults, docstrings and the semantics each one calls.
"""
from __future__ import annotations

import types

import numpy as np

from ....errors import KernelError, UnsupportedError
from ...common import get_nc_sub_version, get_nc_version  # noqa: F401
from ....nki.core.context import current as _current
from ....nki.core.tensor import NkiTensor  # noqa: F401
from ....nki.ops import activation, dma, elementwise, gather, matmul, mx, random, reduce, scan
from ....nki.ops import select, sync as _sync, top8
from ....nki.ops.base import Produced
from ....nki.ops.base import need_tensor as _need
from ....nki.ops.select import FP32_MIN
from .._checks import NkiValidationError, enum_arg as _enum, reject_legacy_kwargs as _reject  # noqa: F401
from .._signature import build as _build
from ..language import NKIObject, equal, maximum  # noqa: F401
from ..registers import VirtualRegister, _reg
from . import checks as _chk, constants
from .constants import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode,  # noqa: F401
                        nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine,
                        unknown_engine, vector_engine)
from .table import ENUM_PARAMS, ROWS

NkiInstruction = Produced
# the instruction families the table's calls name (``ops.<family>.<function>``)
_ops = types.SimpleNamespace(activation=activation, dma=dma, elementwise=elementwise, gather=gather,
                             matmul=matmul, mx=mx, random=random, reduce=reduce, scan=scan,
                             select=select, sync=_sync, top8=top8)
del activation, dma, elementwise, gather, matmul, mx, random, reduce, scan, select, top8


def _handle(r) -> Produced:
    """The instruction handle of the call that just ran."""
    if isinstance(r, Produced):
        return r
    return Produced(len(_current().trace.instructions) - 1)


# -- registers -----------------------------------------------------------------------------------

def register_alloc(x=None) -> VirtualRegister:
    """A new register, optionally holding the integer ``x``."""
    if x is not None and not isinstance(x, (int, np.integer)):
        raise KernelError("register_alloc takes None or an integer", rule="register-type",
                          value=type(x).__name__)
    return VirtualRegister(x)


def register_move(dst, src) -> None:
    """dst <- an integer constant or another register's value."""
    d = _reg(dst, "register_move")
    if isinstance(src, VirtualRegister):
        d._set(src._trnsim_register_value())
    elif isinstance(src, (int, np.integer)) and not isinstance(src, bool):
        d._set(src)
    else:
        raise KernelError("register_move source must be an integer or a register",
                          rule="register-type", value=type(src).__name__)
    _current().record("sync", "register_move", [], [], 1, 1, "int32", "int32")


def register_load(dst, src) -> None:
    """dst <- the single value of a 1-element HBM/SBUF tensor."""
    _sync.register_load(_reg(dst, "register_load"), src)


def register_store(dst, src) -> Produced:
    """The register's value -> a 1-element HBM/SBUF tensor."""
    return _handle(_sync.register_store(dst, _reg(src, "register_store")._trnsim_register_value()))


# -- the instructions, generated from the signature table ----------------------------------------

# what the table's calls and defaults name, and what every wrapper uses
_namespace = dict(ops=_ops, chk=_chk, C=constants, FP32_MIN=FP32_MIN, equal=equal, maximum=maximum,
                  _reject=_chk.reject_kwargs, _enum=_enum, _need=_need, _handle=_handle, __file__=__file__,
                  __name__=__name__)
_build(ROWS, _namespace, ENUM_PARAMS)
globals().update({_row.name: _namespace[_row.name] for _row in ROWS})


# -- not modelled yet (named, never approximated) ------------------------------------------------

def _unsupported(name):
    def f(*a, **kw):
        raise UnsupportedError(f"nisa.{name} is not modelled by trnsim yet", rule="unsupported-api",
                               value=name)
    f.__name__ = name
    f.__doc__ = f"``nisa.{name}``: not modelled (raises UnsupportedError)."
    return f


activate2 = _unsupported("activate2")
rng = _unsupported("rng")
set_rng_seed = _unsupported("set_rng_seed")
rand_set_state = _unsupported("rand_set_state")
rand_get_state = _unsupported("rand_get_state")
rand2 = _unsupported("rand2")
exponential = _unsupported("exponential")
topk = _unsupported("topk")
