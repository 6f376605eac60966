"""The new API's view methods of ``NkiTensor`` (``get_pattern``, ``slice``, ``select``, ``permute``,
``expand_dim``, ``ap`` ...): each builds another view of the same storage."""
from __future__ import annotations

import math

from ...errors import IndexingError, ShapeError, UnsupportedError


class ViewMethods:
    """Mixin of ``NkiTensor``: views described by dims, patterns and offsets (no storage of its own)."""
    __slots__ = ()

    def get_pattern(self):
        """The view as [step, num] pairs in elements, outermost first."""
        e = self.itemsize
        return [[s // e, n] for s, n in zip(self._strides, self._shape)]

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> "NkiTensor":
        """The view ``start:end:step`` along ``dim``."""
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index) -> "NkiTensor":
        """Remove ``dim`` at ``index``; a tensor or register index selects at run time."""
        dim = dim + self.ndim if dim < 0 else dim
        if isinstance(index, type(self)) or hasattr(index, "_trnsim_register_value"):
            if self.on_chip and dim == (self._pdim or 0):
                raise IndexingError("a dynamic select cannot index the partition dim of an on-chip "
                                    "tensor", rule="select-dynamic-partition", value=dim)
            pat = [p for i, p in enumerate(self.get_pattern()) if i != dim]
            return self.ap(pat, offset=0, scalar_offset=index, indirect_dim=dim)
        key = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    def vector_select(self, dim: int, vector_offset: "NkiTensor") -> "NkiTensor":
        """Per-partition indirect rows (HBM, dim 0): row ``vector_offset[p]`` for partition p."""
        if dim != 0 or self.on_chip:
            raise IndexingError("vector_select indexes dim 0 of an HBM tensor", rule="vector-select",
                                limit="dim 0 of an HBM tensor", value=(dim, self.buffer))
        pat = self.get_pattern()
        pat[0] = [pat[0][0], int(vector_offset.shape[0])]
        return self.ap(pat, offset=0, vector_offset=vector_offset, indirect_dim=0)

    def indirect(self, index, num_elem=None) -> "NkiTensor":
        """Tensor indirection (NeuronCore-v4): not modelled (an UnsupportedError)."""
        raise UnsupportedError("tensor indirection (.indirect(), NeuronCore-v4) is not modelled by "
                               "trnsim yet", rule="unsupported-api", value=".indirect()")

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None) -> "NkiTensor":
        """einops-style split / reorder / merge of dims, as one view."""
        from .access_pattern import rearrange
        return rearrange(self, src_pattern, dst_pattern, fixed_sizes or {})

    def permute(self, dims) -> "NkiTensor":
        """A view with the dims reordered (the partition dim of a tile stays first)."""
        dims = tuple(dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute needs a permutation of 0..{self.ndim - 1}", rule="permute",
                             value=dims)
        if self.on_chip and dims[0] != 0:
            raise ShapeError("permute cannot move the partition dim of an on-chip tensor",
                             rule="permute-partition", value=dims)
        return self._derive(self._off, [self._shape[d] for d in dims],
                            [self._strides[d] for d in dims])

    def broadcast(self, dim: int, size: int) -> "NkiTensor":
        """A view repeating size-1 dim ``dim`` ``size`` times (stride 0)."""
        shape = list(self._shape)
        strides = list(self._strides)
        if shape[dim] != 1:
            raise ShapeError("broadcast needs a size-1 dim", rule="broadcast-shape",
                             value=shape[dim])
        shape[dim] = size
        strides[dim] = 0
        return self._derive(self._off, shape, strides)

    def expand_dim(self, dim: int) -> "NkiTensor":
        """A view with a size-1 dim inserted at ``dim`` (not before the partition dim)."""
        if self.on_chip and dim == 0:
            raise ShapeError("expand_dim cannot insert a dim before the partition dim",
                             rule="expand-dim-partition", limit="dim >= 1", value=dim)
        shape = list(self._shape)
        strides = list(self._strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._derive(self._off, shape, strides)

    def squeeze_dim(self, dim: int) -> "NkiTensor":
        """A view without size-1 dim ``dim`` (not the partition dim)."""
        if self.on_chip and dim == 0:
            raise ShapeError("squeeze_dim cannot remove the partition dim", rule="squeeze-partition",
                             limit="dim >= 1", value=dim)
        if self._shape[dim] != 1:
            raise ShapeError("squeeze_dim needs a size-1 dim", rule="squeeze", value=self._shape[dim])
        shape = list(self._shape)
        strides = list(self._strides)
        del shape[dim]
        del strides[dim]
        return self._derive(self._off, shape, strides)

    def flatten_dims(self, start: int, end: int) -> "NkiTensor":
        """A view merging dims ``start``..``end`` into one."""
        merged = math.prod(int(x) for x in self._shape[start:end + 1])
        shape = self._shape[:start] + (merged,) + self._shape[end + 1:]
        return self.reshape(shape)

    def reshape_dim(self, dim: int, shape) -> "NkiTensor":
        """A view splitting dim ``dim`` into ``shape``."""
        return self.reshape(self._shape[:dim] + tuple(shape) + self._shape[dim + 1:])

    def is_indirect(self) -> bool:
        """True for a gathered (indirect) view."""
        return self._gather is not None

    def ap(self, pattern=None, offset=None, scalar_offset=None, vector_offset=None,
           indirect_dim: int = 0, dtype=None, **kw) -> "NkiTensor":
        """New-API ``.ap``: a view from explicit [step, num] pairs and offsets (access_pattern.py)."""
        from .access_pattern import access_pattern
        return access_pattern(self, pattern, offset, scalar_offset, vector_offset, indirect_dim,
                              dtype)
