"""``nki.isa.constants``: the new-API enums (nki-library imports them from here)."""
from __future__ import annotations

from enum import Enum, IntEnum

from ...common import NcVersion as nc_version  # noqa: F401  gen2=2, gen3=3, gen4=4
from ....nki.ops.accumulate import ReduceCmd as reduce_cmd  # noqa: F401  idle..load_reduce = 0..4
from ....nki.ops.base import Engine as engine  # noqa: F401  unknown=0 tensor=1 scalar=2 gpsimd=3 dma=4 vector=5 sync=6
from ....nki.ops.dma import OobMode as oob_mode  # noqa: F401  error=0 skip=1


class dge_mode(IntEnum):
    """Descriptor Generation Engine mode (new numbering: unknown=0, swdge=1, hwdge=2, none=3)."""
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class matmul_perf_mode(Enum):
    """Tensor Engine performance mode."""
    none = "none"
    double_row = "double_row"


class dma_engine(Enum):
    """DMA transfer engine of ``sendrecv``."""
    dma = 1
    gpsimd_dma = 2


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
