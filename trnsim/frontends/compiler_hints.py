"""Compiler hints both NKI generations accept (``ncc`` / ``nki.compiler``): decorators and scopes
that steer the Neuron compiler's scheduling and allocation but never change values, so the
simulator runs the kernel unchanged under them."""
from __future__ import annotations

import contextlib


def _passthrough_decorator(fn=None, **kw):
    if fn is None:
        return lambda f: f
    return fn


skip_middle_end_transformations = _passthrough_decorator
enable_stack_allocator = _passthrough_decorator
force_auto_alloc = _passthrough_decorator


def multi_buffer(*a, **kw):
    """Scope hint for multi-buffered allocation (no effect on values)."""
    return contextlib.nullcontext()


def no_reorder(*a, **kw):
    """Scope hint that keeps instruction order (no effect on values)."""
    return contextlib.nullcontext()


def allocation_scope(*a, **kw):
    """Scope hint for the allocator (no effect on values)."""
    return contextlib.nullcontext()
