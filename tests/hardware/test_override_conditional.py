"""The timing figures the general probes of test_override_effects.py cannot reach (its
``CONDITIONAL`` list): each is read by the timing model only under a condition, so each gets a probe
kernel that meets the condition, and an override of the figure must change that probe's estimate.

A figure is changed to a value chosen (below, with the reason) so that the condition makes it bind:
e.g. ``min_ii_cycles`` only matters while it exceeds an instruction's own cycles.
"""
import itertools
import os

import ml_dtypes
import numpy as np
import pytest

from trnsim import api
from trnsim.nki.harness import run_traced
from trnsim.options import Options
from trnsim.timing.estimate import estimate

HERE = os.path.dirname(os.path.abspath(__file__))
bf16, f32, f8 = ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3
E4 = ml_dtypes.float8_e4m3fn


def _mx_args():
    from trnsim.nki.core import dtypes as dt
    words = np.full((128, 128), 0x38383838, np.uint32).view(dt.float8_e4m3fn_x4)  # all 1.0
    scales = np.full((128, 128), 127, np.uint8)                                     # 2^0
    return words, scales, words, scales


# figure -> (core, probe, args, new value, why that value makes the figure bind)
CASES = {
    "timing.tensor.mm_init_cycles": ("v3", "narrow_mm", lambda: (np.ones((128, 128), bf16), np.ones((128, 32), bf16)),
                                     "128", "32 moving columns: max(32, init) = init"),
    "timing.tensor.ls_cycles_per_column": ("v3", "narrow_mm", lambda: (np.ones((128, 128), bf16), np.ones((128, 32), bf16)),
                                           "2.0", "128 columns x 2 = 256 cycles > the 64-cycle matmul"),
    "timing.tensor.double_row_speedup": ("v3", "double_row_mm", lambda: (np.ones((128, 2, 128), f8), np.ones((128, 2, 512), f8)),
                                         "4.0", "the FLOP weight of a double_row pass"),
    "timing.tensor.mx_speedup": ("v4", "mx_mm", _mx_args, "8.0", "the FLOP weight of an MX pass"),
    "timing.tensor.fp32_transpose_speedup": ("v3", "fp32_pe_transpose", lambda: (np.ones((128, 128), f32),),
                                             "4.0", "passes = fp32_passes / speedup"),
    "timing.tensor.throttle_min_utilization": ("v3", "mm_then_wait", lambda: (np.ones((128, 128), bf16), np.ones((128, 512), bf16)),
                                               "0.1", "PE busy ~40 % of each window: re-engages at 0.5, not at 0.1"),
    "timing.vector.min_ii_cycles": ("v3", "tiny_ops", lambda: (np.ones((128, 1), f32),), "256.0",
                                    "a 1-element op takes 61 cycles, under the floor"),
    "timing.scalar.min_ii_cycles": ("v3", "tiny_ops", lambda: (np.ones((128, 1), f32),), "256.0",
                                    "a 1-element op takes 61 cycles, under the floor"),
    "timing.gpsimd.min_ii_cycles": ("v3", "tiny_ops", lambda: (np.ones((128, 1), f32),), "256.0",
                                    "a 1-element op takes 61 cycles, under the floor"),
    "timing.scalar.bf16_speedup": ("v3", "act_copy", lambda: (np.ones((128, 2048), bf16),), "2.0",
                                   "a bf16 copy on ScalarE"),
    "timing.vector.fp8_on_16bit_path": ("v3", "act_copy", lambda: (np.ones((128, 2048), f8),), "true",
                                        "fp8 copies take the 16-bit fast path"),
    "timing.dma.hwdge_latency_ns": ("v3", "hwdge_dma", lambda: (np.ones((128, 8), f32),), "5000.0",
                                    "tiny DMAs: the fixed cost dominates"),
    "timing.dma.transpose_sbuf_efficiency": ("v3", "sbuf_dma_transpose", lambda: (np.ones((128, 128), bf16),),
                                             "0.05", "the SBUF-sourced transpose's rate"),
    "timing.dma.transpose_sbuf_curve": ("v3", "sbuf_dma_transpose", lambda: (np.ones((128, 128), bf16),),
                                        "true", "256 B per partition: the chunk curve (0.10) slows it"),
    "timing.dma.hbm_efficiency": ("v2", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),), "[0.1, 0.1]",
                                  "the HBM loads and stores of trn1's calibrated curve"),
    "timing.dma.hbm_efficiency_bytes": ("v2", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),),
                                        "[16384, 32768]", "8 KiB per partition falls below the curve: half rate"),
    "timing.reorder.dma_triggers": ("v3", "store_before_load",
                                    lambda: (np.ones((128, 512), f32), np.ones((128, 8192), f32)), "true",
                                    "a 4 MiB load ready from the start goes ahead of a store that waits on compute"),
    "timing.ports.vector_gpsimd_share_sbuf": ("v3", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),),
                                              "true", "Vector and GpSimd overlap on SBUF"),
    "timing.ports.vector_scalar_share_psum": ("v3", "vector_and_scalar_psum", lambda: (np.ones((128, 512), f32),),
                                              "true", "Vector and Scalar read PSUM at the same time"),
    "timing.gpsimd.bubble_overlap": ("v3", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),),
                                     "0.0", "four independent GpSimd ops queue: none of the bubble hides"),
    "timing.vector.two_input_min_free": ("v3", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),),
                                         "4096", "2048-element tensor_tensor: at or under the threshold, one pass"),
    "timing.gpsimd.two_input_min_free": ("v3", "vector_and_gpsimd", lambda: (np.ones((128, 2048), f32),),
                                         "4096", "2048-element tensor_tensor: at or under the threshold, one pass"),
}
TARGET = {"v2": "trn1", "v3": "trn2", "v4": "trn3"}
_n = itertools.count()
_traces: dict = {}


def _trace(core, probe, args):
    key = (core, probe, args)
    if key not in _traces:
        fn = api.load_kernel(os.path.join(HERE, "probe_conditional.py"), probe)
        opts = Options.from_env(target=TARGET[core], timing_only=True)
        _traces[key] = run_traced(fn, *args(), options=opts).traces
    return _traces[key]


def _signature(tr, target, hw):
    est = estimate(tr, target, hw)
    s = est.figures().to_dict()
    # hfu too: the double_row / MX speedups weigh a pass's FLOPs (utilization), not its duration
    return (round(est.latency_ns, 6), round(s["hfu"], 9)) + tuple(
        round(v * est.latency_ns, 6) for _, v in sorted(s["engines"].items()))


@pytest.mark.parametrize("path", sorted(CASES))
def test_conditional_figure_changes_its_probe(tmp_path, path):
    core, probe, args, value, _why = CASES[path]
    tr = _trace(core, probe, args)
    table, _, leaf = f"cores.{core}.{path}".rpartition(".")
    hw = tmp_path / f"cond_{next(_n)}.toml"
    hw.write_text(f'[{table}]\n{leaf} = {{ value = {value}, source = "choice: test" }}\n')
    target = TARGET[core]
    assert _signature(tr, target, str(hw)) != _signature(tr, target, None), f"{path} changed nothing"


def test_every_conditional_figure_has_a_probe():
    from test_override_effects import CONDITIONAL
    descriptive = {p for p, why in CONDITIONAL.items() if why.startswith("descriptive")}
    assert set(CONDITIONAL) - descriptive == set(CASES)
