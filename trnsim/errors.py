"""The TrnsimError family: every error a user can cause (broken kernel, impossible shape, bad file).

Each error names the hardware or API rule it enforces, the limit, the value seen and where in the
user's code it happened, the way Triton's ``OutOfResources`` carries resource, need and limit.
"""
from __future__ import annotations

from typing import Any, Optional


class TrnsimError(Exception):
    """Base class for errors caused by user input (kernels, shapes, configuration, data files)."""

    rule: str = "trnsim"

    def __init__(self, message: str, *, rule: Optional[str] = None, limit: Any = None,
                 value: Any = None, where: Optional[str] = None, hint: Optional[str] = None):
        self.message = message
        if rule is not None:
            self.rule = rule
        self.limit = limit
        self.value = value
        self.where = where
        self.hint = _with_suggestion(hint, value, limit)
        super().__init__(message)

    def __str__(self) -> str:
        parts = [f"[{self.rule}] {self.message}"]
        facts = []
        # a limit equal to the value seen reads as a contradiction ("limit: 1, got: 1"): the
        # message then states the fact alone
        if self.limit is not None and str(self.limit) != str(self.value):
            facts.append(f"limit: {self.limit}")
        if self.value is not None:
            facts.append(f"got: {self.value}")
        if facts:
            parts.append(" (" + ", ".join(facts) + ")")
        if self.where:
            parts.append(f"\n  at {self.where}")
        if self.hint:
            parts.append(f"\n  hint: {self.hint}")
        return "".join(parts)

    def as_dict(self) -> dict:
        """The JSON shape of an error: rule, message, where, plus limit, value and hint when set."""
        d = {"rule": self.rule, "message": self.message, "where": self.where}
        for k in ("limit", "value", "hint"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    def __reduce__(self):  # keep the fields when pickled across processes
        return (_rebuild, (type(self), self.message, self.rule, self.limit, self.value,
                           self.where, self.hint))


def _names_in(limit: Any):
    """The names a limit lists: a list of strings, or text such as "one of a, b, c (or d, e)"."""
    if isinstance(limit, (list, tuple, set, frozenset)):
        return [x for x in limit if isinstance(x, str)]
    if isinstance(limit, str) and "," in limit:
        import re
        return [w for w in re.split(r"[\s,()]+", limit) if w and w not in ("one", "of", "or")]
    return []


def _with_suggestion(hint: Optional[str], value: Any, limit: Any) -> Optional[str]:
    """``hint`` led by "did you mean ..." when ``value`` is a name close to the names ``limit`` lists: every
    error that names a choice from a list suggests the nearest ones, for the CLI and the API alike."""
    if hint and "did you mean" in hint:
        return hint
    names = _names_in(limit)
    if not names:
        return hint
    import difflib
    low = {n.lower(): n for n in names}

    def near(v: str, n: int):
        return [low[m] for m in difflib.get_close_matches(v.lower(), list(low), n=n, cutoff=0.6)]
    if isinstance(value, str) and value and value not in names:
        got = near(value, 3)
        text = f"did you mean {', '.join(got)}?" if got else ""
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        # several unknown names (keys of a data file): the nearest known one for each
        pairs = [(v, near(v, 1)) for v in value[:5] if v not in names]
        text = "; ".join(f"{g[0]} for {v}" for v, g in pairs if g)
        text = f"did you mean {text}?" if text else ""
    else:
        return hint
    if not text:
        return hint
    return text + (f" {hint}" if hint else "")


def _rebuild(cls, message, rule, limit, value, where, hint):
    return cls(message, rule=rule, limit=limit, value=value, where=where, hint=hint)


class KernelError(TrnsimError):
    """A kernel broke an NKI or hardware rule."""
    rule = "kernel"


class PartitionError(KernelError):
    """A tile's partition dimension breaks the hardware's partition limit or alignment."""
    rule = "partition-limit"


class ShapeError(KernelError):
    """Operand shapes do not fit the instruction (mismatched, too large, wrong rank)."""
    rule = "shape"


class CapacityError(KernelError):
    """An allocation does not fit SBUF, PSUM or a PSUM bank."""
    rule = "capacity"


class DtypeError(KernelError):
    """A dtype the target or the instruction does not accept."""
    rule = "dtype"


class MemoryAccessError(KernelError):
    """An engine touched a memory it cannot reach, or an operand sits in the wrong memory."""
    rule = "memory-access"


class OutOfBoundsError(KernelError):
    """An access reaches outside its tensor or memory."""
    rule = "out-of-bounds"


class ReadOnlyError(KernelError):
    """A write to a tensor the kernel may only read (an input, a constant)."""
    rule = "read-only"


class AliasError(KernelError):
    """Operands overlap in a way the instruction does not allow."""
    rule = "alias"


class UninitializedReadError(KernelError):
    """Values from never-written SBUF/PSUM reached an output (TRNSIM_STRICT=1)."""
    rule = "uninitialized-read"


class IndexingError(KernelError):
    """An index or slice the NKI language does not accept."""
    rule = "indexing"


class LaunchError(KernelError):
    """A kernel launch that cannot run (grid, LNC, arguments, nesting)."""
    rule = "launch"


class GenerationError(KernelError):
    """A hardware feature the target NeuronCore generation does not have (e.g. double_row on v2)."""
    rule = "generation"


class UnsupportedError(KernelError):
    """A feature the hardware has but trnsim does not model yet; named, never approximated."""
    rule = "unsupported"


class TileSizeFieldError(KernelError, AttributeError):
    """``nl.tile_size`` has no such field in the API generation in use (still an AttributeError,
    so ``hasattr`` / ``getattr(..., default)`` keep working)."""
    rule = "tile-size-field"


class UserCodeError(TrnsimError):
    """The user's own code raised (a kernel's assert, a syntax error in a kernel file); carries the
    traceback of the user's frames only in ``user_traceback``."""
    rule = "user-code"

    def __init__(self, message: str, *, user_traceback: str = "", **kw):
        super().__init__(message, **kw)
        self.user_traceback = user_traceback

    def __reduce__(self):
        return (_rebuild_user, (self.message, self.rule, self.where, self.user_traceback))


def _rebuild_user(message, rule, where, tb):
    return UserCodeError(message, rule=rule, where=where, user_traceback=tb)


class HardwareFileError(TrnsimError):
    """A hardware data file is missing, malformed, or breaks a catalog rule."""
    rule = "hardware-file"


class ConfigError(TrnsimError):
    """A bad option, environment variable, target name or command-line value."""
    rule = "config"


class SbufSpillWarning(UserWarning):
    """Automatically allocated SBUF tiles exceed the capacity at their peak: the new NKI compiler
    spills to HBM rather than failing (the legacy compiler too with ``[vN.sbuf] legacy_overflow =
    "spill"``); trnsim inserts the spill/reload DMAs into the trace, so they are timed (spill.py)."""


class UninitializedReadWarning(UserWarning):
    """Values derived from never-written SBUF/PSUM reached an output (error under TRNSIM_STRICT=1)."""


class RaceError(KernelError):
    """Two unordered sides (affine_range iterations, SPMD programs, LNC cores) touch overlapping
    bytes and one writes (TRNSIM_STRICT=1; a RaceWarning otherwise)."""
    rule = "race"


class TrnsimWarning(UserWarning):
    """Base class of trnsim's warnings that carry a rule (``rule``)."""
    rule: str = "trnsim"


class RaceWarning(TrnsimWarning):
    """A race between unordered sides: ``rule``, ``first`` / ``second`` (side, role, source line),
    ``tensor`` and the overlapping ``region``; an error (RaceError) under TRNSIM_STRICT=1."""
    rule = "race"

    def __init__(self, message: str, *, rule: str = "race", first=None, second=None,
                 tensor: str = "", region: str = ""):
        super().__init__(message)
        self.rule = rule
        self.first = first
        self.second = second
        self.tensor = tensor
        self.region = region
