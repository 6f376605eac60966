"""Checks shared by the new-API front end: legacy keywords, enum arguments, validation errors."""
from __future__ import annotations

from enum import Enum
from typing import Any, Optional

import numpy as np

from ...errors import KernelError
from ...source import describe, user_loc


class NkiValidationError(KernelError):
    """``nki.isa.NkiValidationError``: a hardware or API constraint was violated."""
    rule = "nki-validation"


def _where() -> str:
    return describe(user_loc())


def reject_legacy_kwargs(kw: dict, fname: str) -> None:
    """New-API calls take no ``mask=`` (and no other unknown keyword)."""
    if not kw:
        return
    if "mask" in kw:
        raise NkiValidationError(
            f"{fname}: mask= was removed in the new NKI API; write in-bounds slices (min(), "
            "nl.ds) instead", rule="new-api-mask", limit="no mask= keyword", value="mask=",
            where=_where())
    name = sorted(kw)[0]
    raise NkiValidationError(f"{fname}() got an unexpected keyword argument {name!r}",
                             rule="new-api-keyword", limit="the documented parameters",
                             value=name, where=_where())


def enum_arg(value: Any, cls, param: str, fname: str, default: Optional[Enum] = None):
    """An enum parameter: a member of ``cls`` (or None for the default); plain ints and strings
    are rejected, as NKI >= 0.3 does."""
    if value is None:
        return default
    if isinstance(value, cls):
        return value
    members = ", ".join(f"{cls.__name__}.{m.name}" for m in cls)
    if isinstance(value, Enum):
        # e.g. the legacy neuronxcc dge_mode, whose numbering differs (none=0 ... unknown=3)
        raise NkiValidationError(f"{fname}: {param} must be a nki.isa.{cls.__name__} member, not "
                                 f"{type(value).__module__}.{type(value).__name__}.{value.name}",
                                 rule="new-api-enum", limit=members, value=repr(value),
                                 where=_where())
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        # nki-library passes plain integers (``_DGE_MODE_NONE = 3``), and the official simulator
        # accepts them: an integer naming a member is that member
        try:
            return cls(int(value))
        except ValueError:
            pass
    kind = "integer" if isinstance(value, (int, np.integer)) else type(value).__name__
    raise NkiValidationError(f"{fname}: {param} must be a {cls.__name__} member, got the {kind} "
                             f"{value!r}", rule="new-api-enum", limit=members, value=repr(value),
                             where=_where())
