"""What the compiler in front of the simulated NeuronCore does with a kernel.

The semantics below ``frontends/`` never ask which API a kernel was written against; they read
these flags.  Each front end hands its compiler's conventions to the launch and to allocation.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Union

from ...errors import LaunchError


@dataclasses.dataclass(frozen=True)
class Conventions:
    """One compiler's treatment of kernels: staging, spilling, tracing, launch and shape rules."""
    name: str
    stage_psum_operands: bool    # PSUM operands of GpSimd / the Tensor engine get a compiler copy to SBUF
    spill_sbuf: bool             # SBUF overflow spills to HBM (a warning) instead of failing
    loops_traced_once: bool      # loop bodies are traced once: later iterations reuse placements
    tensor_truthiness: bool      # ``bool(tensor)`` is True (presence test) rather than an error
    launch_by_lnc: bool          # ``kernel[n]`` sets the LNC degree rather than an SPMD grid
    writable_inputs: bool        # every kernel input may be written (copied back to the caller)
    block_dims: bool             # on-chip shapes may put block dims before ``par_dim``
    buffer_names: bool           # ``buffer=`` may be a string ("sbuf") as well as a buffer object
    psum_tile_spans_banks: bool  # a PSUM tile may span banks (else at most one bank)


# The two NKI compilers trnsim models: neuronxcc 2.x (``neuronxcc.nki``, NKI 0.1) and the NKI >= 0.2
# compiler (``nki``).  Facts from their documentation; front ends pick one of these.
PRESETS: Dict[str, Conventions] = {
    "legacy": Conventions(name="legacy", stage_psum_operands=True, spill_sbuf=False,
                          loops_traced_once=True, tensor_truthiness=False, launch_by_lnc=False,
                          writable_inputs=False, block_dims=True, buffer_names=True,
                          psum_tile_spans_banks=False),
    "new": Conventions(name="new", stage_psum_operands=False, spill_sbuf=True,
                       loops_traced_once=False, tensor_truthiness=True, launch_by_lnc=True,
                       writable_inputs=True, block_dims=False, buffer_names=False,
                       psum_tile_spans_banks=True),
}


def conventions(c: Union[str, Conventions]) -> Conventions:
    """A Conventions object, or the preset of that name ("legacy", "new")."""
    if isinstance(c, Conventions):
        return c
    got = PRESETS.get(c)
    if got is None:
        raise LaunchError(f"unknown kernel API {c!r}", rule="kernel-api", limit=sorted(PRESETS),
                          value=repr(c))
    return got


def spills_sbuf(c: Conventions, sbuf) -> bool:
    """Whether SBUF overflow spills to HBM (a warning) rather than failing, for compiler ``c`` on a
    core whose SBUF figures are ``sbuf``: the new compiler always spills; for neuronxcc the core's
    ``sbuf.legacy_overflow`` decides (cores.toml: its programming model says the compiler spills,
    its known issues list buffer-overflow failures; trnsim has long failed, the default kept)."""
    return c.spill_sbuf or (c.name == "legacy" and sbuf.legacy_overflow == "spill")
