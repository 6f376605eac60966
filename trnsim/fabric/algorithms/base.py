"""What every algorithm module shares: the op names and the 'cannot run this' signal."""
from __future__ import annotations

OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast")


class NotApplicable(Exception):
    """An algorithm cannot run this op on these ranks (the reason says why); the runtime skips it."""


class WrongOp(NotApplicable):
    """The algorithm does not implement this collective at all (left out of error messages)."""


def is_pow2(n: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return n > 0 and n & (n - 1) == 0


def log2(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1
