"""Each timing and clock figure of a core, changed in a hardware file, changes the estimate of at
least one probe kernel (latency or an engine's busy time): an override is never accepted and ignored.

The probes are traced once and re-timed per override (the trace is independent of the timing figures).
Figures the probes cannot reach are listed in ``CONDITIONAL`` with the condition under which the
timing model reads them; everything else is checked.
"""
import dataclasses
import itertools
import os

import ml_dtypes
import numpy as np
import pytest

from trnsim import api
from trnsim.hardware import get_core
from trnsim.nki.harness import run_traced
from trnsim.options import Options
from trnsim.timing.estimate import estimate

HERE = os.path.dirname(os.path.abspath(__file__))
bf16, f32, f8 = ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3

# read by the timing model only for instructions the probes do not issue: each has its own probe
# in test_override_conditional.py (which checks that this list and its cases agree)
CONDITIONAL = {
    "timing.tensor.mm_init_cycles": "matmuls with fewer than 64 moving columns",
    "timing.tensor.ls_cycles_per_column": "LoadStationary not hidden behind the previous matmul",
    "timing.tensor.double_row_speedup": "perf_mode double_row matmuls",
    "timing.tensor.mx_speedup": "nc_matmul_mx (v4)",
    "timing.tensor.fp32_transpose_speedup": "fp32 PE transposes in the is_transpose mode",
    "timing.tensor.throttle_min_utilization": "throttled stretches long enough to reach the floor",
    "timing.vector.min_ii_cycles": "back-to-back independent tiny instructions",
    "timing.scalar.min_ii_cycles": "back-to-back independent tiny instructions",
    "timing.gpsimd.min_ii_cycles": "back-to-back independent tiny instructions",
    "timing.scalar.bf16_speedup": "v4 bf16 tensor_scalar/tensor_copy on ScalarE",
    "timing.vector.fp8_on_16bit_path": "FP8 copies and tensor_tensor ops on Vector/Scalar (the probes use bf16/fp32)",
    "timing.dma.hwdge_latency_ns": "DMAs issued through the hardware DGE",
    "timing.dma.transpose_sbuf_efficiency": "SBUF-to-SBUF DMA transposes",
    "timing.reorder.dma_triggers": "a store waiting on compute ahead of a later long load (false on v3)",
    "timing.dma.transpose_sbuf_curve": "SBUF-to-SBUF DMA transposes",
    "timing.dma.hbm_efficiency": "a generation with an HBM curve of its own (v2; v3 has none)",
    "timing.dma.hbm_efficiency_bytes": "a generation with an HBM curve of its own (v2; v3 has none)",
    "timing.ports.vector_gpsimd_share_sbuf": "Vector and GpSimd SBUF accesses that overlap in time",
    "timing.ports.vector_scalar_share_psum": "Vector and Scalar PSUM accesses that overlap in time",
    "timing.gpsimd.bubble_overlap": "GpSimd instructions queued behind another GpSimd instruction",
    "timing.vector.two_input_min_free": "two-input Vector instructions between 128 and the new threshold",
    "timing.gpsimd.two_input_min_free": "two-input GpSimd instructions between 128 and the new threshold",
    "clocks.profiler_base_hz": "descriptive (refused as an override, hardware/rules.py)",
}


def _probes():
    m = api.load_kernel(os.path.join(HERE, "probe_kernels.py"), "mm")
    mod = __import__(m.__module__)
    return [(mod.mm, (np.ones((512, 128), bf16), np.ones((512, 512), bf16))),
            (mod.mm, (np.ones((512, 128), f32), np.ones((512, 512), f32))),
            (mod.mm, (np.ones((512, 128), f8), np.ones((512, 512), f8))),
            (mod.mm_long, (np.ones((128, 128), bf16), np.ones((128, 512), bf16))),
            (mod.onezero, (np.ones((128, 128), f32), np.ones((128, 512), f32))),
            (mod.engines, (np.ones((128, 512), bf16),)),
            (mod.engines, (np.ones((128, 512), f32),)),
            (mod.dmas, (np.ones((128, 8192), f32),)),
            (mod.dma_tr, (np.ones((128, 128), bf16),)),
            (mod.masked, (np.ones((128, 512), f32),))]


@pytest.fixture(scope="module")
def traces():
    opts = Options.from_env(target="trn2", timing_only=True)
    return [run_traced(fn, *args, options=opts).traces for fn, args in _probes()]


def _signature(traces, hw):
    """Latency and per-engine busy time of every probe on trn2 with hardware file ``hw``, with the
    data's engine assignment and with every instruction on its traced engine (``fixed``: the
    figures of an engine the assignment moved work away from still bind)."""
    out = []
    for tr in traces:
        for policy in (None, "fixed"):
            est = estimate(tr, "trn2", hw, engine_policy=policy)
            s = est.figures().to_dict()
            out.append((round(est.latency_ns, 6),) + tuple(round(v * est.latency_ns, 6)
                                                          for k, v in sorted(s["engines"].items())))
    return out


def _figures():
    core = get_core("trn2")

    def leaves(obj, pre=""):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if dataclasses.is_dataclass(v):
                yield from leaves(v, pre + f.name + ".")
            else:
                yield pre + f.name, v
    return [(p, v) for p, v in leaves(core) if p.startswith(("timing.", "clocks.")) or p == "dma_engines"]


def _changed(path: str, v):
    """A different, still valid value: doubled; fractions halved; a zero made positive; bools flipped."""
    leaf = path.split(".")[-1]
    if isinstance(v, bool):
        return str(not v).lower()
    if isinstance(v, str) and path == "timing.reorder.policy":  # the other stream order
        return '"in_order"' if v != "in_order" else '"window"'
    if isinstance(v, str):  # the engine-assignment policy: the other one
        return '"fixed"' if v != "fixed" else '"earliest_finish"'
    if isinstance(v, tuple) and v and isinstance(v[0], str):  # engines balanced over: Vector only
        return '["vector"]'
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x / 2 if leaf == "efficiency" else x * 2) for x in v) + "]"
    if "efficiency" in leaf or leaf in ("throttle_start", "throttle_min_utilization"):
        return str(v / 2 if v > 0 else 0.5)
    if v == 0:
        return "100.0"
    return str(v * 2)


_n = itertools.count()


@pytest.mark.parametrize("path,value", [f for f in _figures() if f[0] not in CONDITIONAL],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_override_changes_an_estimate(traces, tmp_path, path, value):
    table, _, leaf = f"cores.v3.{path}".rpartition(".")
    hw = tmp_path / f"fx_{next(_n)}.toml"
    hw.write_text(f'[{table}]\n{leaf} = {{ value = {_changed(path, value)}, source = "choice: test" }}\n')
    assert _signature(traces, str(hw)) != _signature(traces, None), f"{path} changed nothing"


def test_conditional_list_names_real_figures():
    names = {p for p, _ in _figures()}
    assert set(CONDITIONAL) <= names
