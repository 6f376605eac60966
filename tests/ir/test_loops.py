"""The loop-block C kernels (ir/_loops.c) against their Python references and hand-worked records:
a LoopBlock's synthesized records, the fast-forward's regularity test on three recorded iterations
and its check of the last one, and taking records out of the cyclic collector."""
import gc
import random

import numpy as np
import pytest

from trnsim.ir import loops
from trnsim.ir.trace import Instruction, LoopBlock, Region
from trnsim.nki.core import fastforward as ff
from trnsim.source import SourceLoc

needs_c = pytest.mark.skipif(loops._mod is None, reason="C extension not built")
LOC = SourceLoc("kernel.py", 7, "k")


def _reg(tensor, partition=0, start=0, stop=512, memory="sbuf", dtype="bfloat16", partitions=128):
    return Region(memory, tensor, f"t{tensor}", partition, partitions, start, stop,
                  (stop - start) // 2 * partitions, dtype, stop - start, False)


def _ins(reads, writes, opcode="matmul", attrs=(), index=0):
    return Instruction(index, "tensor", opcode, tuple(reads), tuple(writes), 128, 512, "bfloat16",
                       "float32", attrs, LOC, 0)


def _random_block(rng: random.Random):
    """A template of 1-4 instructions, 1-3 regions each, random moves and local ranks."""
    template, deltas = [], []
    nlocal = rng.randint(0, 3)
    for j in range(rng.randint(1, 4)):
        nr, nw = rng.randint(0, 2), rng.randint(1, 2)
        regs = [_reg(rng.randint(1, 50), rng.randint(0, 4), 64 * rng.randint(0, 8),
                     64 * rng.randint(9, 16)) for _ in range(nr + nw)]
        template.append(_ins(regs[:nr], regs[nr:], index=j))
        deltas.append(tuple((rng.choice([0, 0, 1]), rng.choice([0, 64, -64, 4096]),
                             rng.choice([0, 64, 4096]),
                             rng.randrange(nlocal) if nlocal and rng.random() < 0.5 else -1)
                            for _ in regs))
    return LoopBlock(template, rng.randint(0, 5), rng.randint(1, 40), deltas, nlocal)


def _records(block, first, lo, hi, native):
    was = loops.set_enabled(native)
    try:
        block._packed = None
        return list(block.materialize(first, lo, hi))
    finally:
        loops.set_enabled(was)


@needs_c
def test_block_records_match_the_reference():
    rng = random.Random(5)
    for _ in range(200):
        blk = _random_block(rng)
        lo = rng.randint(0, blk.n - 1)
        hi = rng.randint(lo, blk.n)
        first = rng.randint(0, 1000)
        got, ref = _records(blk, first, lo, hi, True), _records(blk, first, lo, hi, False)
        assert got == ref
        assert all(type(a) is Instruction for a in got)
        assert all(type(r) is Region for a in got for r in a.reads + a.writes)


@needs_c
def test_block_records_worked_by_hand():
    # k0 = 3: synthesized iteration c is iteration 3 + c; the read moves 512 bytes and one
    # partition per iteration, the written tile is the iteration's own (rank 0, 2 locals)
    t = _ins([_reg(5, 0, 0, 512)], [_reg(9, 0, 0, 1024)])
    blk = LoopBlock([t], 3, 4, [((1, 512, 512, -1), (0, 0, 0, 1))], 2)
    recs = _records(blk, 100, 0, 4, True)
    assert [r.index for r in recs] == [100, 101, 102, 103]
    assert [(r.reads[0].partition, r.reads[0].start, r.reads[0].stop) for r in recs] == \
        [(3, 1536, 2048), (4, 2048, 2560), (5, 2560, 3072), (6, 3072, 3584)]
    assert [r.reads[0].tensor for r in recs] == [5] * 4
    first = blk.synth_first
    assert [r.writes[0].tensor for r in recs] == [-(first + 2 * c + 1) for c in range(4)]
    assert recs[2].writes[0][2:] == t.writes[0][2:]  # a region that does not move is the template's


@needs_c
def test_block_streams_in_chunks():
    t = _ins([_reg(5)], [_reg(6)])
    blk = LoopBlock([t, t._replace(opcode="transpose")], 0, 3000, [((0, 64, 64, -1), (0, 0, 0, 0))] * 2, 1)
    got, ref = _records(blk, 0, 0, blk.n, True), _records(blk, 0, 0, blk.n, False)
    assert len(got) == 6000 and got == ref


def _iterations(rng, nloc=2):
    """Three recorded iterations of a regular body: a shared input moving 512 bytes a step and
    ``nloc`` tiles each iteration allocates anew (ids above its snapshot's)."""
    sids = (100, 200, 300)
    segs = []
    for it, sid in enumerate(sids):
        seg = []
        for j in range(3):
            reads = [_reg(7, 0, 512 * it, 512 * it + 512)]
            writes = [_reg(sid + 1 + (j % nloc), 0, 0, 1024)]
            seg.append(_ins(reads, writes, index=10 * it + j))
        segs.append(seg)
    return segs, sids, (1, 1, 1)


def _both(fn_c, fn_py, *args):
    was = loops.set_enabled(True)
    try:
        got = fn_c(*args)
    finally:
        loops.set_enabled(was)
    return got, fn_py(*args)


@needs_c
def test_compare_regular_iterations():
    segs, sids, synths = _iterations(random.Random(0))
    got, ref = _both(ff.compare, ff.compare_py, segs, sids, synths)
    assert got == ref
    deltas, nlocal = got
    # worked by hand: the input moves 512 bytes, the tiles are ranks 0, 1, 0 of 2
    assert nlocal == 2
    assert deltas == [((0, 512, 512, -1), (0, 0, 0, 0)), ((0, 512, 512, -1), (0, 0, 0, 1)),
                      ((0, 512, 512, -1), (0, 0, 0, 0))]


@needs_c
@pytest.mark.parametrize("change", ["opcode", "memory", "step", "shared", "carried", "attrs"])
def test_compare_irregular_iterations(change):
    segs, sids, synths = _iterations(random.Random(0))
    a = segs[2][1]
    r = a.reads[0]
    if change == "opcode":
        segs[2][1] = a._replace(opcode="transpose")
    elif change == "memory":
        segs[2][1] = a._replace(reads=(r._replace(memory="psum"),))
    elif change == "step":
        segs[2][1] = a._replace(reads=(r._replace(start=r.start + 64, stop=r.stop + 64),))
    elif change == "shared":  # the shared input differs in the last iteration
        segs[2][1] = a._replace(reads=(r._replace(tensor=8),))
    elif change == "carried":  # a tile of iteration 1 read in iteration 2
        segs[2][1] = a._replace(writes=(a.writes[0]._replace(tensor=sids[1] + 1),))
    else:  # attributes holding arrays cannot be compared: not regular
        for seg in segs:
            seg[0] = seg[0]._replace(attrs=(("mask", np.arange(3)),))
    got, ref = _both(ff.compare, ff.compare_py, segs, sids, synths)
    assert got is None and ref is None


@needs_c
def test_predicts_matches_the_reference():
    segs, sids, synths = _iterations(random.Random(0))
    deltas, _ = ff.compare_py(segs, sids, synths)
    # iteration 7 of the loop, recorded after a snapshot at storage id 900
    last = [ins._replace(reads=(ins.reads[0]._replace(start=ins.reads[0].start + 7 * 512,
                                                      stop=ins.reads[0].stop + 7 * 512),),
                         writes=(ins.writes[0]._replace(tensor=901 + j % 2),))
            for j, ins in enumerate(segs[0])]
    args = (segs[0], deltas, 7, last, 900, 1)
    assert _both(ff.predicts, ff.predicts_py, *args) == (True, True)
    for k, sid in ((6, 900), (7, 901)):  # another step; a tile from before the snapshot
        bad = (segs[0], deltas, k, last, sid, 1)
        assert _both(ff.predicts, ff.predicts_py, *bad) == (False, False)


@needs_c
def test_untrack():
    r = Region("sbuf", 5, "t", 0, 128, 0, 512, 65536, "bfloat16", 512, False)
    ins = _ins([r], [r._replace(tensor=6)])
    assert gc.is_tracked(ins)
    assert loops.untrack(ins) is True
    assert not gc.is_tracked(ins) and not gc.is_tracked(ins.reads[0])
    # a record holding a mutable container may be part of a cycle: it stays tracked
    held = _ins([r], [r], attrs=(("cb", []),))
    assert loops.untrack(held) is False and gc.is_tracked(held)


@needs_c
def test_records_are_untracked():
    t = _ins([_reg(5)], [_reg(6)])
    blk = LoopBlock([t], 0, 4, [((0, 64, 64, -1), (0, 0, 0, 0))], 1)
    assert not any(gc.is_tracked(r) for r in _records(blk, 0, 0, 4, True))
