"""Timing-only inputs of the op-cost build are one zero broadcast over the shape: the launch gives
them a lazily mapped zero buffer (no conversion, no copy) and runs exactly as with real zeros."""
import ml_dtypes
import numpy as np

from trnsim.kernels.timer import run_reference
from trnsim.nki.core import dtypes as dt
from trnsim.nki.harness import _zero_broadcast


def test_a_zero_broadcast_becomes_a_zero_buffer_of_the_storage_size():
    # bf16 is stored as fp32 (4 bytes) with precise fp: 3 x 5 elements -> 60 zero bytes
    sd = dt.storage_dtype(dt.as_dtype("bfloat16"), True)
    arr = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), (3, 5))
    buf = _zero_broadcast(arr, sd)
    assert buf is not None and buf.dtype == np.uint8 and buf.nbytes == 3 * 5 * sd.itemsize
    assert not buf.any()


def test_other_inputs_take_the_copying_path():
    sd = np.dtype(np.float32)
    assert _zero_broadcast(np.broadcast_to(np.float32(1.5), (4, 4)), sd) is None   # not zero
    assert _zero_broadcast(np.zeros((4, 4), np.float32), sd) is None              # real array
    assert _zero_broadcast(np.broadcast_to(np.float32(-0.0), (4, 4)), sd) is None  # -0 bits


def test_a_reference_kernel_times_the_same_with_broadcast_and_real_zeros(monkeypatch):
    from trnsim.kernels import registry
    shape = {"m": 256, "k": 256, "n": 512}
    lazy = run_reference("matmul", shape, "bfloat16", "trn2").latency_ns
    monkeypatch.setattr(registry, "_zeros", lambda s, d: np.zeros(s, d))   # real arrays
    real = run_reference("matmul", shape, "bfloat16", "trn2").latency_ns
    assert lazy == real
