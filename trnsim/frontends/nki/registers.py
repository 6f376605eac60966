"""Kernel-side objects of the new API that both ``nki.language`` and ``nki.isa`` use: ``NKIObject``
and the engine-sequencer registers (``nisa.register_alloc``) that drive dynamic loops."""
from __future__ import annotations

from typing import Any

from ...errors import KernelError


class NKIObject:
    """Base class for kernel-side dataclasses and configuration objects (a plain class on CPU)."""

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # NKI treats a subclass's plain class attributes (``x = None``, no annotation) as fields:
        # public kernels write ``@dataclass class P(nl.NKIObject): x = None`` and build ``P(x=1)``
        # (nki-library attention_cte).  ``@dataclass`` only sees annotated names, so annotate the
        # plain immutable ones here, before the decorator runs; the class value stays the default.
        super().__init_subclass__(**kwargs)
        ann = dict(cls.__dict__.get("__annotations__", {}))
        for name, value in list(cls.__dict__.items()):
            if name.startswith("_") or name in ann:
                continue
            if value is None or isinstance(value, (bool, int, float, str, tuple)):
                ann[name] = Any
        cls.__annotations__ = ann


class VirtualRegister(NKIObject):
    """A 32-bit engine-sequencer register (``nisa.register_alloc``): dynamic loop bounds, while
    conditions and dynamic offsets (``.ap(scalar_offset=reg)``)."""

    def __init__(self, state=None, frozen=False):
        self.value = None if state is None else _wrap32(state)
        self.frozen = bool(frozen)

    def _trnsim_register_value(self) -> int:
        if self.value is None:
            raise KernelError("a register was read before any value was moved or loaded into it",
                              rule="register-uninitialized", value="register_alloc()")
        return self.value

    def _set(self, v) -> None:
        self.value = _wrap32(v)

    def __index__(self) -> int:
        return self._trnsim_register_value()

    __int__ = __index__

    def __bool__(self) -> bool:  # ``while reg:`` (deprecated but simulated)
        return self._trnsim_register_value() != 0

    def __repr__(self):
        return f"VirtualRegister({self.value})"

    def _no_host_math(self, *_):
        from ...source import describe, user_loc
        raise KernelError("a VirtualRegister holds a device value: Python arithmetic and ordering "
                          "on it are not traced (in NKI they raise TypeError)",
                          rule="register-host-arithmetic", value=repr(self),
                          where=describe(user_loc()),
                          hint="pass it as .ap(scalar_offset=reg) / nl.ds(reg, n) / a loop bound, "
                               "or compute on a 1x1 SBUF tensor and register_load the result")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_host_math
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = _no_host_math
    __mod__ = __rmod__ = __neg__ = _no_host_math
    __lt__ = __le__ = __gt__ = __ge__ = _no_host_math


def _wrap32(v) -> int:
    v = int(v)
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _reg(x, fname: str) -> VirtualRegister:
    if not isinstance(x, VirtualRegister):
        raise KernelError(f"{fname}: expected a VirtualRegister from nisa.register_alloc(), got "
                          f"{type(x).__name__}", rule="register-type", value=type(x).__name__)
    return x


