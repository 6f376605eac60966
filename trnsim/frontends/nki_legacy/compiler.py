"""``neuronxcc.nki.compiler`` (ncc): manual allocation and compiler hints."""
from __future__ import annotations

from ...nki.core.alloc import AutoAlloc, CallbackAlloc, ModAlloc
from ..compiler_hints import (allocation_scope, enable_stack_allocator,  # noqa: F401
                              force_auto_alloc, multi_buffer, no_reorder,
                              skip_middle_end_transformations)


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
