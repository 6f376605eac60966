"""``neuronxcc.nki.compiler`` (ncc): manual allocation and compiler hints."""
from __future__ import annotations

import contextlib

from ..core.alloc import AutoAlloc, CallbackAlloc, ModAlloc


class _Memory:
    def __init__(self, memory: str):
        self._memory = memory

    def mod_alloc(self, *, base_addr=0, base_partition=0, num_par_tiles=(), num_free_tiles=(),
                  base_bank=0, num_bank_tiles=(), **kw):
        """Place block i of a tensor in physical tile ``i mod num_*_tiles`` from ``base_addr``."""
        return ModAlloc(self._memory, base_addr=base_addr, base_partition=base_partition,
                        base_bank=base_bank, num_par_tiles=num_par_tiles,
                        num_free_tiles=num_free_tiles, num_bank_tiles=num_bank_tiles)

    def alloc(self, func):
        """Place each block where ``func(block_idx, pdim_size, fdim_size)`` says."""
        return CallbackAlloc(self._memory, func)

    def auto_alloc(self):
        return AutoAlloc(self._memory)


sbuf = _Memory("sbuf")
psum = _Memory("psum")


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
