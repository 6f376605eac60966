"""Views that are not one strided window: gathers (per-dim index arrays, resolved at access time)
and manually placed legacy block tensors (block index -> the byte offset of its tile)."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np



class Gather:
    """A non-strided access: per-dim integer index arrays into ``base`` (read/written under mask)."""
    __slots__ = ("base", "index", "shape", "index_tiles")

    def __init__(self, base: "NkiTensor", index: Tuple, shape: Tuple[int, ...], index_tiles=()):
        self.base = base          # a strided NkiTensor
        self.index = index        # tuple of int arrays / ints / index tiles, one per base dim
        self.shape = shape
        self.index_tiles = index_tiles

    def resolve(self, tile_values: Optional[dict] = None) -> Tuple[np.ndarray, ...]:
        """Integer index arrays broadcast to ``shape`` (index tiles read from their storage)."""
        out = []
        nd = len(self.shape)
        for ix in self.index:
            if hasattr(ix, "_st") and hasattr(ix, "array"):   # an index tile (NkiTensor)
                v = tile_values[id(ix)] if tile_values else ix.array()
                v = np.asarray(v).astype(np.int64)
            elif hasattr(ix, "resolve_index"):  # an index computed from tile values at access time
                v = ix.resolve_index(tile_values)
            elif isinstance(ix, np.ndarray):
                v = ix
            else:
                v = np.asarray(ix, dtype=np.int64)
            if v.ndim < nd:
                v = v.reshape(v.shape + (1,) * (nd - v.ndim)) if v.ndim else v
            out.append(np.broadcast_to(v, self.shape))
        return tuple(out)


class BlockMap:
    """Manual placement of a legacy block tensor: block index tuple -> byte offset of its tile."""
    __slots__ = ("block_shape", "fn")

    def __init__(self, block_shape: Tuple[int, ...], fn: Callable[[Tuple[int, ...]], int]):
        self.block_shape = block_shape
        self.fn = fn
