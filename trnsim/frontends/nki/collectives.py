"""``nki.collectives``: cross-device collectives.  The official NKI simulator does not implement
them and neither does trnsim's core simulator (``trnsim collective`` estimates their cost at model
level); every call raises UnsupportedError naming the API, except ``rank_id`` (0 on a single
device) and ``ReplicaGroup`` (a plain description)."""
from __future__ import annotations

from typing import Any

from ...errors import UnsupportedError
from .language import NKIObject


class ReplicaGroup(NKIObject):
    """A group of ranks taking part in a collective (lists of ranks, non-overlapping)."""

    def __init__(self, *groups: Any, **kwargs: Any):
        if len(groups) == 1 and isinstance(groups[0], (list, tuple)):
            groups = tuple(groups[0])
        self.groups = [list(g) if isinstance(g, (list, tuple)) else g for g in groups]
        super().__init__(**kwargs)

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


def rank_id(name=None) -> int:
    """This rank's id; a single simulated device is rank 0."""
    return 0


def _unsupported(name: str):
    def f(*a, **kw):
        raise UnsupportedError(f"nki.collectives.{name} is not simulated (the official NKI simulator "
                               "does not implement collectives either)", rule="unsupported-api",
                               value=f"nki.collectives.{name}")
    f.__name__ = name
    f.__doc__ = f"``nki.collectives.{name}``: not simulated (raises UnsupportedError)."
    return f


all_reduce = _unsupported("all_reduce")
all_gather = _unsupported("all_gather")
all_gather_v = _unsupported("all_gather_v")
reduce_scatter = _unsupported("reduce_scatter")
all_to_all = _unsupported("all_to_all")
all_to_all_v = _unsupported("all_to_all_v")
collective_permute = _unsupported("collective_permute")
collective_permute_implicit = _unsupported("collective_permute_implicit")
collective_permute_implicit_reduce = _unsupported("collective_permute_implicit_reduce")
collective_permute_implicit_current_processing_rank_id = _unsupported(
    "collective_permute_implicit_current_processing_rank_id")
