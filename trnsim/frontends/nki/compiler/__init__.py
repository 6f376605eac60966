"""``nki.compiler``: compiler hints (no effect on values) and the compile-mode entry points, which
need the Neuron compiler and are not available in the simulator."""
from __future__ import annotations

from . import frontend, ncc_driver  # noqa: F401
from ...compiler_hints import (allocation_scope, enable_stack_allocator,  # noqa: F401
                               force_auto_alloc, multi_buffer, no_reorder,
                               skip_middle_end_transformations)
