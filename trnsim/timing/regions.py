"""Where a region's bytes are for dependency analysis: its physical key and rectangle (SBUF tiles
the compiler's allocator placed on shared bytes, ``trace.meta['sbuf_placement']``), and the
bucket sizes both dependency backends index byte ranges by (deps.py, native.py)."""
from __future__ import annotations

from typing import Dict, Tuple

from ..ir.trace import Region, Trace

BUCKET_ONCHIP = 2048      # bytes per bucket within a partition (one PSUM bank)
BUCKET_HBM = 1 << 16      # bytes per bucket along an HBM tensor


def physical_map(trace: Trace) -> Dict[int, Tuple[int, int]]:
    """SBUF tile id -> (physical buffer id, byte offset) the compiler's allocator gave it
    (``trace.meta['sbuf_placement']``, nki/core/placement.py); empty under the private policy."""
    flat = trace.meta.get("sbuf_placement") or ()
    return {int(flat[k]): (int(flat[k + 1]), int(flat[k + 2])) for k in range(0, len(flat), 3)}


def physical(reg: Region, remap: Dict[int, Tuple[int, int]]):
    """``reg``'s (memory, buffer) key and rectangle, on its physical bytes where it was placed."""
    p0, p1, b0, b1 = reg.partition, reg.partition + reg.partitions, reg.start, reg.stop
    if remap and reg.memory == "sbuf":
        hit = remap.get(reg.tensor)
        if hit is not None:
            return ("sbuf", hit[0]), p0, p1, b0 + hit[1], b1 + hit[1]
    return (reg.memory, reg.tensor), p0, p1, b0, b1
