"""The cold cache build in several processes: workers run the timer, the parent writes the rows."""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Dict, List, Tuple

from ...lifetime import die_with_parent
from .keys import row_key, shape_text


def _run_one(timer, kernel: str, shape: Dict[str, int], dtype: str, target: str, hardware_file):
    t0 = time.perf_counter()
    secs = float(timer(kernel, shape, dtype, target, hardware_file))
    return secs, time.perf_counter() - t0


def warm_parallel(costs, todo: List[Tuple[str, Dict[str, int], str]], progress, workers: int) -> int:
    """Simulate ``todo`` (kernel, shape, dtype) in a process pool and store each result as it
    arrives; the biggest shapes go first so no worker is left with a long one at the end."""
    order = sorted(todo, key=lambda t: -_size(t[1]))
    done = 0
    with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        futs = {pool.submit(_run_one, costs.timer, k, s, d, costs.target, costs.hardware_file): (k, s, d)
                for k, s, d in order}
        for fut in as_completed(futs):
            kernel, shape, dt = futs[fut]
            secs, wall = fut.result()
            ver = costs.version(kernel)
            costs.cache.put(row_key(costs.scope, kernel, ver, shape, dt), costs.scope, kernel, ver,
                            shape_text(shape), dt, costs.target, costs.hw_hash, secs, wall)
            costs._load()[(kernel, ver, shape_text(shape), dt)] = secs
            costs.timer_calls += 1
            costs.sim_wall_s += wall
            done += 1
            if progress is not None:
                progress(done, len(order), f"{kernel} {shape_text(shape)} {dt}")
    return done


def _size(shape: Dict[str, int]) -> float:
    p = 1.0
    for v in shape.values():
        p *= max(1, v)
    return p
