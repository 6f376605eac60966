"""The engines' per-partition accumulator registers and ``nisa.reduce_cmd``: the Scalar engine's
(activation) and the Vector engine's (shared by ``tensor_scalar_reduce``, ``select_reduce``,
``range_select`` and the cumulative scan, so a reduction started by one instruction can continue in
another)."""
from __future__ import annotations

from enum import IntEnum
from typing import Optional

import numpy as np

from ...errors import ShapeError
from ..core.alu import BINARY
from . import base
from .base import where


class ReduceCmd(IntEnum):
    """``nisa.reduce_cmd``."""
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


def _accumulator(ctx) -> np.ndarray:
    acc = getattr(ctx, "act_accum", None)
    if acc is None:
        acc = np.zeros(ctx.spec.tile_size.pmax, dtype=np.float32)
        ctx.act_accum = acc
    return acc


def _vector_accumulator(ctx) -> np.ndarray:
    acc = getattr(ctx, "dve_accum", None)
    if acc is None:
        acc = np.zeros(ctx.spec.tile_size.pmax, dtype=np.float32)
        ctx.dve_accum = acc
    return acc


_CUM_OPS = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def _cmd(reduce_cmd) -> ReduceCmd:
    return ReduceCmd(int(reduce_cmd)) if reduce_cmd is not None else ReduceCmd.idle


def _reduce_into(ctx, op: str, P: int, cmd: ReduceCmd, rname: str, rows: Optional[np.ndarray],
                 reduce_res, rinit, extra: list) -> None:
    """Steer the Vector accumulator with ``cmd`` (``rows`` = this instruction's per-partition
    reduction) and read it out into ``reduce_res``."""
    acc = _vector_accumulator(ctx)
    ident = _CUM_OPS.get(rname, 0.0)
    if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        acc[:P] = ident
    if cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.load_reduce) and rows is not None:
        acc[:P] = BINARY[rname](acc[:P], rows)
    if reduce_res is None:
        return
    rr = base.need_tensor(reduce_res, "reduce_res", op)
    base.check_writable(ctx, rr, op)
    if rr.shape[0] != P or rr.size != P:
        raise ShapeError(f"{op}: reduce_res must be a ({P}, 1) tile, got {rr.shape}",
                         rule="reduce-res-shape", limit=(P, 1), value=rr.shape, where=where())
    base.write(ctx, rr, acc[:P].copy().reshape(rr.shape) if ctx.numerics else None,
               None if rinit is None else rinit.reshape(rr.shape))
    extra.append(rr)
