"""Reading a ``LoopBlock``'s synthesized records, and comparing recorded loop iterations (the
fast-forward's regularity test): C kernels (``_loops.c``) when built, and their Python references.

Each C kernel matches its reference exactly (tests/ir/test_loops.py): same records, same deltas,
same verdicts.  A kernel that meets records it does not handle raises ``ValueError`` and the
caller runs the reference.  ``TRNSIM_NATIVE=0`` (read at import) or ``set_enabled(False)`` forces
the references.
"""
from __future__ import annotations

import os
from typing import Iterator

try:
    from . import _loops as _mod
except ImportError:  # not built (no compiler at install time)
    _mod = None

_OFF = ("0", "false", "off", "no")
_on = os.environ.get("TRNSIM_NATIVE", "").strip().lower() not in _OFF
_new_tuple = tuple.__new__   # builds a NamedTuple from a full field tuple (NamedTuple._make)

# records per C call when a block is read as a stream: a list this long is small next to the
# block's own figures, and the Python generator pays one step per chunk instead of per record
_CHUNK = 2048


def untrack(record) -> bool:
    """Take a trace record (a NamedTuple of atoms and such tuples) out of the cyclic collector's
    lists: it can hold no cycle, and the collector never untracks NamedTuples itself, so a long
    trace would be walked again at every collection.  No effect without the extension (and no
    effect on any result); True when the record is untracked."""
    return _mod.untrack(record) if _mod is not None else False


def module():
    """The extension module, or None when it is not built or switched off."""
    return _mod if _on else None


def set_enabled(on: bool) -> bool:
    """Switch the C kernels on or off (tests compare both); returns the previous setting."""
    global _on
    was, _on = _on, bool(on)
    return was


def pack(template, deltas):
    """The block's region moves packed for ``records`` (bytes), or False when the C kernels are
    off or do not handle these records (the block is then read by ``records_py``)."""
    mod = module()
    if mod is None:
        return False
    try:
        return mod.pack(tuple(template), tuple(deltas))
    except ValueError:
        return False


def records(block, packed, first_index: int, lo: int, hi: int, region_type, instruction_type
            ) -> Iterator:
    """Records ``lo .. hi`` of ``block`` built in C, a chunk at a time; from a chunk the C code
    declines on, the Python reference builds the rest."""
    for a in range(lo, hi, _CHUNK):
        try:
            got = _mod.materialize(packed, block.template, block.k0, block.nlocal,
                                   block.synth_first, first_index, a, min(hi, a + _CHUNK),
                                   region_type, instruction_type)
        except ValueError:
            yield from records_py(block, first_index, a, hi, region_type, instruction_type)
            return
        yield from got


def records_py(block, first_index: int, lo: int, hi: int, Region, Instruction) -> Iterator:
    """Records ``lo .. hi`` of ``block`` (the reference of ``records``)."""
    L = len(block.template)
    if lo >= hi:
        return
    # records are built as plain tuples (no keyword _replace); a region that neither moves nor
    # belongs to the iteration is the template's own (immutable) object; per-iteration figures
    # advance once per template pass
    template, nlocal = block.template, block.nlocal
    plans = block._plans
    if plans is None:
        plans = block._plans = [None] * L
    c, j = divmod(lo, L)
    k = block.k0 + c
    local = -(block.synth_first + c * nlocal)
    for index in range(first_index + lo, first_index + hi):
        ins = template[j]
        regs, nr, moving = plans[j] or _moving(block, j)
        if moving:
            regs = list(regs)
            for i, r, dp, ds, de, rank in moving:
                regs[i] = _new_tuple(Region, (
                    r[0], r[1] if rank < 0 else local - rank, r[2], r[3] + k * dp, r[4],
                    r[5] + k * ds, r[6] + k * de, r[7], r[8], r[9], r[10]))
        yield _new_tuple(Instruction, (index, ins[1], ins[2], tuple(regs[:nr]),
                                       tuple(regs[nr:])) + ins[5:])
        j += 1
        if j == L:
            j = 0
            k += 1
            local -= nlocal


def _moving(block, j: int) -> tuple:
    """Template ``j``'s regions (reads then writes), how many are reads, and (position, region,
    dpartition, dstart, dstop, rank) of each that moves or belongs to the iteration: worked out
    on first use, once per block (a block read in part pays only for what it reads)."""
    ins = block.template[j]
    regs = ins[3] + ins[4]
    got = block._plans[j] = (regs, len(ins[3]), tuple(
        (i, r) + d for i, (r, d) in enumerate(zip(regs, block.deltas[j]))
        if d[3] >= 0 or d[0] or d[1] or d[2]))
    return got
