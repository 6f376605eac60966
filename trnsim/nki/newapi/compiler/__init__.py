"""``nki.compiler``: compiler hints (no effect on values) and the compile-mode entry points, which
need the Neuron compiler and are not available in the simulator."""
from __future__ import annotations

import contextlib

from . import frontend, ncc_driver  # noqa: F401


def _passthrough_decorator(fn=None, **kw):
    if fn is None:
        return lambda f: f
    return fn


skip_middle_end_transformations = _passthrough_decorator
enable_stack_allocator = _passthrough_decorator
force_auto_alloc = _passthrough_decorator


def multi_buffer(*a, **kw):
    return contextlib.nullcontext()


def no_reorder(*a, **kw):
    return contextlib.nullcontext()


def allocation_scope(*a, **kw):
    return contextlib.nullcontext()
