"""The one engine table: every layer (nki, timing, profile, cli) names NeuronCore engines from here.

An engine has a canonical name (what ``Instruction.engine`` holds), the profiler's short track name
(Neuron Explorer's qPE / qDVE / qACT / qPOOL / qSP), a display label, the numeric code the timing
arrays store (its position in ``ENGINE_ORDER``) and the ``nisa.engine`` enum value of the new NKI
API.  No numpy, no NKI: plain data and lookups.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple, Type

from ..errors import ConfigError, TrnsimError


class UnknownEngineError(ConfigError, KeyError):
    """An engine name the table does not know (also a KeyError, for dict-like callers)."""
    rule = "engine"

    def __str__(self) -> str:  # KeyError would quote the message
        return TrnsimError.__str__(self)


@dataclass(frozen=True)
class EngineSpec:
    """One engine of a NeuronCore: its names, display label and codes."""
    name: str           # canonical name, as Instruction.engine holds it
    track: str          # profiler track name (PE, DVE, ACT, POOL, SP, DMA)
    label: str          # human label ("Tensor", "Vector", ...)
    code: int           # index in ENGINE_ORDER: what the timing arrays (uint8) store
    nisa_code: int      # ``nisa.engine`` enum value (new NKI API numbering)
    compute: bool       # an in-order compute engine (the DMA queues are scheduled apart)

    @property
    def display(self) -> str:
        """"Tensor (PE)": label and profiler track, for tables and legends ("DMA" alone)."""
        return self.label if self.track == self.label else f"{self.label} ({self.track})"


# ---- the table ---------------------------------------------------------------------------------
# Order = track order in profiles = timing code.  nisa codes: the new API's nki.isa.engine enum
# (unknown = 0, tensor = 1, scalar = 2, gpsimd = 3, dma = 4, vector = 5, sync = 6).
ENGINE_TABLE: Tuple[EngineSpec, ...] = (
    EngineSpec("tensor", "PE", "Tensor", 0, 1, True),
    EngineSpec("vector", "DVE", "Vector", 1, 5, True),
    EngineSpec("scalar", "ACT", "Scalar", 2, 2, True),
    EngineSpec("gpsimd", "POOL", "GpSimd", 3, 3, True),
    EngineSpec("sync", "SP", "Sync", 4, 6, True),
    EngineSpec("dma", "DMA", "DMA", 5, 4, False),
)
# extra spellings users and the NKI APIs use (lower-cased before lookup)
_EXTRA_ALIASES = {"act": "scalar", "activation": "scalar", "pool": "gpsimd", "pe": "tensor",
                  "dve": "vector", "sp": "sync", "pool_engine": "gpsimd"}
# -----------------------------------------------------------------------------------------------

ENGINES: Tuple[str, ...] = tuple(e.name for e in ENGINE_TABLE)
ENGINE_ORDER: Tuple[str, ...] = ENGINES
COMPUTE_ENGINES: Tuple[str, ...] = tuple(e.name for e in ENGINE_TABLE if e.compute)
ENGINE_CODE: Dict[str, int] = {e.name: e.code for e in ENGINE_TABLE}
BY_NAME: Dict[str, EngineSpec] = {e.name: e for e in ENGINE_TABLE}
BY_NISA_CODE: Dict[int, EngineSpec] = {e.nisa_code: e for e in ENGINE_TABLE}
TRACK_NAME: Dict[str, str] = {e.name: e.track for e in ENGINE_TABLE}
LABEL: Dict[str, str] = {e.name: e.label for e in ENGINE_TABLE}
DISPLAY: Dict[str, str] = {e.name: e.display for e in ENGINE_TABLE}
ALIASES: Dict[str, str] = {**{e.name: e.name for e in ENGINE_TABLE},
                           **{e.track.lower(): e.name for e in ENGINE_TABLE},
                           **{e.name + "_engine": e.name for e in ENGINE_TABLE},
                           **_EXTRA_ALIASES}

assert [e.code for e in ENGINE_TABLE] == list(range(len(ENGINE_TABLE)))  # code = position


def canonical(engine: Any, error: Type[TrnsimError] = UnknownEngineError) -> str:
    """The canonical engine name for a name, alias (PE, DVE, ACT, POOL, SP, any case) or nisa code;
    anything else raises ``error`` with rule "engine" (a kernel's bad ``engine=``: KernelError)."""
    if isinstance(engine, EngineSpec):
        return engine.name
    if isinstance(engine, str):
        got = ALIASES.get(engine.strip().lower())
        if got is not None:
            return got
    elif isinstance(engine, int) and not isinstance(engine, bool):
        spec = BY_NISA_CODE.get(int(engine))
        if spec is not None:
            return spec.name
    raise error(f"unknown engine {engine!r}", rule="engine",
                      limit=" | ".join(ENGINES), value=repr(engine),
                      hint="aliases: PE, DVE, ACT, POOL, SP (any case)")


def check(name: str) -> str:
    """``name`` itself when it is a canonical engine name (as traces hold them); otherwise raise
    UnknownEngineError (aliases are for user input, not for traces)."""
    if name in BY_NAME:
        return name
    raise UnknownEngineError(f"unknown engine {name!r} in the trace", rule="engine",
                             limit=" | ".join(ENGINES), value=repr(name))


def spec(engine: Any) -> EngineSpec:
    """The EngineSpec of an engine name, alias or nisa code."""
    return BY_NAME[canonical(engine)]


def code(engine: Any) -> int:
    """The timing-array code of an engine (its position in ENGINE_ORDER)."""
    return BY_NAME[canonical(engine)].code
