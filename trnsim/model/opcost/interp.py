"""Interpolation over a kernel grid, one axis at a time (pure functions of a point lookup).

Inside the grid: log-log linear between the two bracketing grid values (exact for power laws).
Under the smallest value: ``below`` is a log-log slope (0 = a partial tile costs a whole tile).
Over the largest value: ``above = "linear"`` extends the last grid interval affinely (per-tile
throughput: every extra tile costs what the last interval's tiles cost, exact for a + b*x), or a
number is a log-log slope.  Evaluating axis by axis makes extrapolation in several axes exact for
any function affine in each of them (a + b*m*k*n).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Mapping, Tuple

from ...errors import ConfigError
from .grids import Axis, KernelGrid

Lookup = Callable[[Dict[str, int]], float]


def bracket(axis: Axis, x: float) -> Tuple[str, List[int], float]:
    """How ``x`` sits on ``axis``: (mode, grid values used, parameter) with mode one of
    "exact", "inside" (parameter = log weight of the upper value), "below" / "above" (parameter =
    x, the caller applies the axis' rule)."""
    vals = axis.values
    if axis.discrete:
        if x not in vals:
            raise ConfigError(f"{axis.name}={x} is not one of the simulated values",
                              rule="opcost-shape", limit=list(vals), value=x)
        return "exact", [int(x)], 1.0
    if x <= 0:
        raise ConfigError(f"{axis.name} must be positive", rule="opcost-shape", limit="> 0", value=x)
    if x in vals:
        return "exact", [int(x)], 1.0
    if x < vals[0]:
        return "below", [vals[0]], float(x)
    if x > vals[-1]:
        return "above", list(vals[-2:]), float(x)
    hi = next(i for i, v in enumerate(vals) if v > x)
    lo_v, hi_v = vals[hi - 1], vals[hi]
    return "inside", [lo_v, hi_v], (math.log(x) - math.log(lo_v)) / (math.log(hi_v) - math.log(lo_v))


def _extend(axis: Axis, x: float, used: List[int], times: List[float]) -> float:
    """Time past the largest grid value."""
    if axis.above == "linear" and len(used) == 2:
        (x0, x1), (t0, t1) = used, times
        per_unit = max(0.0, (t1 - t0) / (x1 - x0))
        return t1 + (x - x1) * per_unit
    slope = 1.0 if axis.above == "linear" else float(axis.above)
    return times[-1] * (x / used[-1]) ** slope


def evaluate(grid: KernelGrid, shape: Mapping[str, float], lookup: Lookup) -> Tuple[float, bool]:
    """(seconds at ``shape``, exact grid hit), reading grid points through ``lookup``."""
    for ax in grid.axes:
        if ax.name not in shape:
            raise ConfigError(f"shape for {grid.kernel} lacks {ax.name}", rule="opcost-shape",
                              limit=[a.name for a in grid.axes], value=sorted(shape))
    plan = [(ax,) + bracket(ax, shape[ax.name]) for ax in grid.axes]
    exact = all(mode == "exact" for _, mode, _, _ in plan)

    def go(i: int, point: Dict[str, int]) -> float:
        if i == len(plan):
            return lookup(point)
        ax, mode, used, par = plan[i]
        times = [go(i + 1, dict(point, **{ax.name: v})) for v in used]
        if mode == "exact":
            return times[0]
        if mode == "inside":
            return math.exp((1.0 - par) * math.log(times[0]) + par * math.log(times[1]))
        if mode == "below":
            return times[0] * (par / used[0]) ** ax.below
        return _extend(ax, par, used, times)

    return go(0, {}), exact
