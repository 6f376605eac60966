"""Our own reference NKI kernels (matmul, flash attention, norms, softmax, elementwise, AdamW) and
``time_reference``, which times them on the timing model for the model layer's op-cost table.

Sits above the front ends (it runs NKI code through the ``neuronxcc.nki`` compat names); the model
layer never imports it: ``trnsim.api`` hands ``time_reference`` to ``SimulatedOpCosts``.
"""
from .registry import KERNELS, VERSIONS, KernelSpec, spec
from .timer import run_reference, time_reference

__all__ = ["KERNELS", "VERSIONS", "KernelSpec", "run_reference", "spec", "time_reference"]
