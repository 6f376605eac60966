"""Simulator options in one frozen object (the Pallas ``InterpretParams`` idea), read from the environment.

Environment variables (all optional):
  TRNSIM_TARGET=trn1|trn2|trn3      generation to simulate (also NEURON_PLATFORM_TARGET_OVERRIDE,
                                    NKI_NC_VERSION=gen2|gen3|gen4 as the public harnesses set them);
                                    any name in a core's ``targets`` in the hardware files
  TRNSIM_STRICT=1                   uninitialized reads reaching an output become errors
  NKI_PRECISE_FP=0                  keep low-precision tensors in fp32 (official simulator switch)
  NEURON_RT_STOCHASTIC_ROUNDING_EN=1  stochastic rounding on fp32 -> bf16/fp8 writes
  TRNSIM_SEED=<int>                 seed for stochastic rounding and random ops
  TRNSIM_HARDWARE=<file>            a hardware data file that overrides the built-in catalog
  TRNSIM_TIMING_ONLY=1              skip numerics (shapes, regions and the trace are kept)
  TRNSIM_UNINIT=nan|zero            fill of fresh SBUF/PSUM allocations (NaN shows bugs)
  TRNSIM_ENGINE_POLICY=fixed|earliest_finish  how the timing model places instructions left to
                                    the compiler (engine=unknown); default: the hardware data's
                                    timing.assign.policy
  TRNSIM_STREAM_ORDER=in_order|window  whether the timing model lets the compiler reorder each
                                    Vector/Scalar/GpSimd stream (timing/reorder.py); default:
                                    the hardware data's timing.reorder.policy
  TRNSIM_RACE_CHECK=0               skip race detection (affine_range iterations, SPMD programs,
                                    LNC cores); it costs ~10-20 % of a timing-only run
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Literal, Mapping, Optional

from .errors import ConfigError
from .hardware.catalog import load_catalog


def canonical_target(name: str, hardware_file: Optional[str] = None) -> str:
    """Map any accepted spelling (trn2, gen3, v3, trn2.48xlarge) to its canonical target.

    The spellings are data (``targets`` of each core in the hardware files, a user's file
    included), so a what-if generation's names work without code."""
    return load_catalog(hardware_file).canonical_target(name)


def _flag(env: Mapping[str, str], key: str, default: bool) -> bool:
    v = env.get(key)
    if v is None or v == "":
        return default
    v = v.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"environment variable {key} must be 0 or 1", rule="env", value=v)


def _fast_forward(v: Optional[str]) -> str:
    v = (v or "auto").strip().lower()
    aliases = {"1": "auto", "on": "auto", "true": "auto", "yes": "auto", "0": "off",
               "false": "off", "no": "off"}
    v = aliases.get(v, v)
    if v not in ("auto", "all", "off"):
        raise ConfigError("TRNSIM_FAST_FORWARD must be 0, 1 or all", rule="env", value=v)
    return v


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything that changes how a kernel is simulated. Build with ``Options.from_env()``."""
    target: str = "trn2"
    strict: bool = False
    precise_fp: bool = True
    stochastic_rounding: bool = False
    seed: int = 0
    hardware_file: Optional[str] = None
    timing_only: bool = False
    uninit: Literal["nan", "zero"] = "nan"
    # timing-only runs: synthesize regular loop iterations instead of running them
    # (nki/core/fastforward.py): "auto" = legacy affine/sequential loops, "all" = also the new
    # API's unrolled loops, "off" = run every iteration
    fast_forward: Literal["auto", "all", "off"] = "auto"
    # engine assignment of instructions left to the compiler (timing/assign.py); None = the
    # hardware data's timing.assign.policy
    engine_policy: Optional[str] = None
    # order of each Vector/Scalar/GpSimd stream (timing/reorder.py): "in_order" or "window"; None =
    # the hardware data's timing.reorder.policy
    stream_order: Optional[str] = None
    # race detection between affine_range iterations / SPMD programs / LNC cores (nki/core/races.py);
    # off skips its bookkeeping (timing-only sweeps over kernels already known to be race-free)
    race_check: bool = True

    def __post_init__(self):
        object.__setattr__(self, "target", canonical_target(self.target, self.hardware_file))
        if self.uninit not in ("nan", "zero"):
            raise ConfigError("uninit fill must be 'nan' or 'zero'", rule="options", value=self.uninit)
        if self.fast_forward not in ("auto", "all", "off"):
            raise ConfigError("fast_forward must be 'auto', 'all' or 'off'", rule="options",
                              value=self.fast_forward)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None, **overrides) -> "Options":
        """Options from the TRNSIM_* / NKI_* environment variables, ``overrides`` winning."""
        env = os.environ if env is None else env
        target = (env.get("TRNSIM_TARGET") or env.get("NEURON_PLATFORM_TARGET_OVERRIDE")
                  or env.get("NKI_NC_VERSION") or "trn2")
        seed_s = env.get("TRNSIM_SEED", "0")
        try:
            seed = int(seed_s)
        except ValueError:
            raise ConfigError("TRNSIM_SEED must be an integer", rule="env", value=seed_s) from None
        opts = dict(
            target=target,
            strict=_flag(env, "TRNSIM_STRICT", False),
            precise_fp=_flag(env, "NKI_PRECISE_FP", True),
            stochastic_rounding=_flag(env, "NEURON_RT_STOCHASTIC_ROUNDING_EN", False),
            seed=seed,
            hardware_file=env.get("TRNSIM_HARDWARE") or None,
            timing_only=_flag(env, "TRNSIM_TIMING_ONLY", False),
            uninit=(env.get("TRNSIM_UNINIT") or "nan").lower(),
            fast_forward=_fast_forward(env.get("TRNSIM_FAST_FORWARD")),
            engine_policy=env.get("TRNSIM_ENGINE_POLICY") or None,
            stream_order=env.get("TRNSIM_STREAM_ORDER") or None,
            race_check=_flag(env, "TRNSIM_RACE_CHECK", True),
        )
        opts.update(overrides)
        return cls(**opts)

    def replace(self, **kw) -> "Options":
        """A copy with the given fields changed (validated again)."""
        return dataclasses.replace(self, **kw)
