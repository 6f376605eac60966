"""Refcount baselines for "is this value a temporary?": ``x[...] = op(...)`` writes a temporary
result straight into ``x`` (as the NKI compiler does), a named tile is copied.  The baselines are
measured once on this interpreter by probes that read the refcount as ``NkiTensor`` does."""
from __future__ import annotations

import sys


class _Probe:
    def __init__(self):
        self.seen = []

    def __setitem__(self, key, value):
        n = sys.getrefcount(value)
        self.seen.append(n)

    def __iadd__(self, o):
        n = sys.getrefcount(o)
        self.seen.append(n)
        return self


def _calibrate():
    p = _Probe()
    p[0] = object()
    named = object()
    p[0] = named
    tmp_set, named_set = p.seen
    q = _Probe()
    q += object()
    q += named
    tmp_i, named_i = q.seen
    if not (tmp_set < named_set and tmp_i < named_i):  # pragma: no cover - exotic interpreter
        return -1, -1
    return tmp_set, tmp_i


_TEMP_REFS, _TEMP_REFS_INPLACE = _calibrate()
# The probes run one frame deeper than NkiTensor.__setitem__'s own getrefcount call, with the same
# bindings (argument + stack), so the baselines transfer.
