"""``SimulatedOpCosts``: per-op times from reference NKI kernels simulated on the timing model at grid
shapes, cached on disk, interpolated log-log between grid shapes."""
from __future__ import annotations

import time as _time
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from ...errors import ConfigError
from ...options import canonical_target
from ..ops import Op, OpCosts, OpTime
from .cache import CostCache, shape_of
from .grids import KernelGrid, grid_for, load_grids
from .interp import evaluate
from .keys import hardware_hash, row_key, scope_key, shape_text
from .select import IMPLS, kernel_calls
from .warm import warm_parallel

# timer(kernel, shape, dtype, target, hardware_file=None) -> seconds; may carry .versions {kernel: int}
Timer = Callable[..., float]
Progress = Callable[[int, int, str], None]  # (done, total, label)

NO_TIMER_HINT = ("pass timer=trnsim.kernels.time_reference (trnsim.api does this for you), e.g. "
                 "SimulatedOpCosts('trn2', timer=trnsim.kernels.time_reference); or warm the cache "
                 "first with `python bench/opcost.py`")

PointKey = Tuple[str, int, str, str]  # kernel, version, shape text, dtype


class SimulatedOpCosts:
    """Time ``Op``s on one (logical) NeuronCore of ``target`` from simulated reference kernels."""

    def __init__(self, target: str, hardware_file: Optional[str] = None, cache_dir: Optional[str] = None,
                 timer: Optional[Timer] = None, progress: Optional[Progress] = None,
                 lnc: Optional[int] = None, grids: Union[None, str, Mapping] = None,
                 fallback: Optional[OpCosts] = None, attention_impl: str = "fused",
                 attention: Union[None, str, Mapping] = None):
        # attention_impl: "fused" (default: the NKI kernels NxDI serves with, which the serving
        # model is calibrated on) or "unfused" (the eager fallback); attention: overrides of
        # data/attention.toml
        if attention_impl not in IMPLS:
            raise ConfigError(f"unknown attention implementation {attention_impl!r}", rule="attention-impl",
                              limit=list(IMPLS), value=attention_impl)
        self.attention_impl = attention_impl
        self.attention = attention
        self.target = canonical_target(target)
        self.hardware_file = hardware_file
        self.timer = timer
        self.progress = progress
        self.grids: Dict[str, KernelGrid] = load_grids(grids)
        self.cache = CostCache(cache_dir)
        self.hw_hash = hardware_hash(hardware_file)
        self.scope = scope_key(self.hw_hash, self.target)
        self._lnc = lnc
        self._fallback = fallback
        self._points: Optional[Dict[PointKey, float]] = None
        self._memo: Dict[Tuple[Op, int], OpTime] = {}  # an estimate asks for the same ops per layer
        self._versions: Dict[str, int] = dict(getattr(timer, "versions", {}) or {})
        self.timer_calls = 0
        self.sim_wall_s = 0.0

    # -- configuration resolved lazily (the catalog is only read when needed) ------------------
    @property
    def lnc(self) -> int:
        """Physical cores per logical core (default: the largest LNC the core supports)."""
        if self._lnc is None:
            from ...hardware import load_catalog
            core = load_catalog(self.hardware_file).core_for(self.target)
            self._lnc = max(core.lnc)
        return self._lnc

    @property
    def fallback(self) -> OpCosts:
        """Costs for ops without a reference kernel (embedding gathers, MX matmuls): the roofline."""
        if self._fallback is None:
            from ...hardware import load_catalog
            from ..ops import RooflineOpCosts
            cat = load_catalog(self.hardware_file)
            chip = cat.chip_for(self.target)
            self._fallback = RooflineOpCosts(cat.cores[chip.core], chip, self.lnc)
        return self._fallback

    def version(self, kernel: str) -> int:
        """The reference kernel's version: the timer's, else the newest one in the cache."""
        if kernel not in self._versions:
            have = [k[1] for k in self._load() if k[0] == kernel]
            self._versions[kernel] = max(have) if have else 0
        return self._versions[kernel]

    # -- the cache ------------------------------------------------------------------------
    def _load(self) -> Dict[PointKey, float]:
        if self._points is None:
            self._points = {(k, v, s, d): t for k, v, s, d, t in self.cache.rows(self.scope)}
        return self._points

    def point_time(self, kernel: str, shape: Mapping[str, int], dtype: str) -> float:
        """Seconds of one kernel at one shape: from memory, the cache, or a simulation."""
        pts = self._load()
        ver = self.version(kernel)
        text = shape_text(shape)
        pk = (kernel, ver, text, dtype)
        got = pts.get(pk)
        if got is not None:
            return got
        key = row_key(self.scope, kernel, ver, shape, dtype)
        got = self.cache.get(key)  # another process may have written it since we loaded
        if got is None:
            got = self._simulate(kernel, shape, dtype)
            self.cache.put(key, self.scope, kernel, ver, text, dtype, self.target, self.hw_hash, got,
                           self._last_wall)
            got = self.cache.get(key) or got  # the first writer's row wins
        pts[pk] = got
        return got

    def _simulate(self, kernel: str, shape: Mapping[str, int], dtype: str) -> float:
        if self.timer is None:
            raise ConfigError(f"no timer to simulate {kernel} {shape_text(shape)} {dtype} on "
                              f"{self.target} (the op-cost cache has no such row)",
                              rule="opcost-timer", value=f"{kernel} {shape_text(shape)}",
                              hint=NO_TIMER_HINT)
        t0 = _time.perf_counter()
        secs = float(self.timer(kernel, dict(shape), dtype, self.target, self.hardware_file))
        self._last_wall = _time.perf_counter() - t0
        self.sim_wall_s += self._last_wall
        self.timer_calls += 1
        if not secs > 0.0:
            raise ConfigError(f"timer returned a non-positive time for {kernel} {shape_text(shape)}",
                              rule="opcost-timer", limit="> 0", value=secs)
        return secs

    _last_wall = 0.0

    # -- the OpCosts protocol ---------------------------------------------------------------
    def kernel_time(self, kernel: str, shape: Mapping[str, float], dtype: str) -> Tuple[float, bool]:
        """(seconds, exact grid hit) of ``kernel`` at any shape, interpolated between grid points."""
        return evaluate(grid_for(self.grids, kernel), shape, lambda p: self.point_time(kernel, p, dtype))

    def time(self, op: Op) -> OpTime:
        """Seconds of ``op`` on one (logical) core: "simulated" on an exact grid hit, "interpolated"
        otherwise, the fallback's answer where no reference kernel exists."""
        memo = self._memo.get((op, self.lnc))
        if memo is not None:
            return memo
        calls = kernel_calls(op, self.lnc, self.attention_impl, self.attention)
        if not calls:
            got = self.fallback.time(op)
        else:
            total, all_exact = 0.0, True
            for call in calls:  # an unfused attention is several kernels, one after another
                secs, exact = self.kernel_time(call.kernel, call.shape, call.dtype)
                total += secs * call.repeats
                all_exact = all_exact and exact
            got = OpTime(seconds=total, how="simulated" if all_exact else "interpolated")
        self._memo[(op, self.lnc)] = got
        return got

    # -- the cold build -------------------------------------------------------------------
    def grid_points(self, kernels: Optional[List[str]] = None) -> List[Tuple[str, Dict[str, int], str]]:
        """Every (kernel, shape, dtype) of the full grid for this target (dtypes the core lacks skipped)."""
        from ...hardware import load_catalog
        core = load_catalog(self.hardware_file).core_for(self.target)
        have = set(core.tensor.input_dtypes) | set(core.dtypes)
        out = []
        for name, grid in self.grids.items():
            if kernels is not None and name not in kernels:
                continue
            for dt in grid.dtypes:
                if dt not in have:
                    continue
                out.extend((name, p, dt) for p in grid.points())
        return out

    def warm(self, progress: Optional[Progress] = None, kernels: Optional[List[str]] = None,
             workers: int = 1) -> int:
        """Simulate every grid point not yet cached (the cold cache build), in ``workers``
        processes when > 1 (the timer must then be picklable); returns how many ran."""
        progress = progress or self.progress
        pts = self._load()
        todo = [(k, s, d) for k, s, d in self.grid_points(kernels)
                if (k, self.version(k), shape_text(s), d) not in pts]
        if todo and self.timer is None:
            self._simulate(*todo[0])  # raises the no-timer error
        if workers > 1 and len(todo) > 1:
            return warm_parallel(self, todo, progress, workers)
        for i, (kernel, shape, dt) in enumerate(todo):
            if progress is not None:
                progress(i, len(todo), f"{kernel} {shape_text(shape)} {dt}")
            self.point_time(kernel, shape, dt)
        if progress is not None:
            progress(len(todo), len(todo), "done")
        return len(todo)
