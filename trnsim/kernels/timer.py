"""``time_reference``: run a reference kernel timing-only (shapes, no numerics, loop fast-forward)
on the timing model and return its latency in seconds."""
from __future__ import annotations

import gc
from typing import Mapping, Optional

from ..errors import ConfigError
from .registry import VERSIONS, spec


def _np_dtype(dtype: str):
    import ml_dtypes
    import numpy as np
    table = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3": ml_dtypes.float8_e4m3,
             "float32": np.float32}
    if dtype not in table:
        raise ConfigError(f"no reference-kernel dtype {dtype!r}", rule="dtype", limit=sorted(table),
                          value=dtype)
    return table[dtype]


def run_reference(kernel: str, shape: Mapping[str, int], dtype: str, target: str,
                  hardware_file: Optional[str] = None):
    """The timing estimate (``trnsim.timing.Estimate``) of one reference kernel at one shape."""
    from ..options import Options
    from ..timing import estimate_run
    ks = spec(kernel)
    missing = [a for a in ks.axes if a not in shape]
    if missing:
        raise ConfigError(f"shape for {kernel} lacks {missing}", rule="reference-shape",
                          limit=list(ks.axes), value=sorted(shape))
    if dtype not in ks.dtypes:
        raise ConfigError(f"reference kernel {kernel} has no {dtype} variant", rule="dtype",
                          limit=list(ks.dtypes), value=dtype)
    args, kw = ks.build(shape, _np_dtype(dtype))
    # our reference kernels are race-checked by their functional tests; the sweep skips the check
    opts = Options(target=target, hardware_file=hardware_file, timing_only=True, race_check=False)
    return estimate_run(ks.load().run(*args, options=opts, **kw))


def time_reference(kernel: str, shape: Mapping[str, int], dtype: str, target: str,
                   hardware_file: Optional[str] = None) -> float:
    """Seconds one reference kernel takes at ``shape`` on one NeuronCore of ``target``."""
    # the cyclic collector is paused for the run: it would walk the trace's records (immutable
    # tuples, no cycles) again at every collection while they live; they die with the run, and
    # the little cyclic garbage the run leaves is collected once the collector resumes
    was = gc.isenabled()
    gc.disable()
    try:
        return run_reference(kernel, shape, dtype, target, hardware_file).latency_ns * 1e-9
    finally:
        if was:
            gc.enable()


time_reference.versions = VERSIONS  # read by SimulatedOpCosts for its cache keys
