"""The instruction that takes over an evicted tile's bytes waits for the victim's last reader
(write-after-read), whether the victim was stored or clean (its HBM copy current, no store)."""
import warnings

import numpy as np

from trnsim.nki.core.spill import plan_spills
from trnsim.options import Options
from trnsim.timing import estimate
from trnsim.timing.deps import dependencies_py

F = 25600   # 100 KiB of fp32 per partition: two such tiles fit trn2's 224 KiB, three do not


def _tiles(spec):
    intervals = {sid: [acc[0][0], acc[-1][0], nbytes, f"t{sid}", None]
                 for sid, (nbytes, acc) in spec.items()}
    return intervals, {sid: acc for sid, (_, acc) in spec.items()}


def test_every_eviction_of_a_live_tile_is_a_handover_clean_or_not():
    """test_spill_planner's clean reload: y (tile 2) is evicted twice: at 2 for z (dirty, stored)
    and at 5 for q (clean after its reload at 4, no store).  Both hand y's bytes over."""
    iv, acc = _tiles({1: (2000, [(0, True), (3, False), (7, False)]),
                      2: (2000, [(1, True), (4, False), (9, False)]),
                      3: (2000, [(2, True), (2, False)]),
                      4: (2000, [(5, True), (6, False)])})
    plan = plan_spills(iv, acc, 4000, 0)
    assert [m.kind for m in plan.moves] == ["store", "load", "load"]   # no store at 5
    assert plan.handovers == [(2, 2), (5, 2)]


def _kernel():
    import trnsim.compat
    trnsim.compat.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def k(inp):
        out = nl.ndarray((128, F), dtype=inp.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray((128, F), dtype=inp.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=inp[0])               # x written
        y = nl.ndarray((128, F), dtype=inp.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=y, src=inp[1])               # y written
        z = nl.ndarray((128, F), dtype=inp.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=z, src=inp[2])               # no room: y stored, z takes its bytes
        nisa.dma_copy(dst=out, src=z)                  # z dies
        nisa.activation(dst=x, data=x, op=nl.exp)
        nisa.activation(dst=x, data=y, op=nl.exp)      # y reloaded (clean), read by Scalar
        q = nl.ndarray((128, F), dtype=inp.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q, src=inp[3])               # no room: clean y goes without a store
        nisa.dma_copy(dst=out, src=q)
        nisa.dma_copy(dst=out, src=x)
        nisa.dma_copy(dst=out, src=y)                  # y reloaded again
        return out

    return k


def test_a_clean_victims_bytes_wait_for_its_last_reader():
    """Trace (after the spill DMAs are inserted): 2 = y's store, 6 = y's reload, 7 = the Scalar
    activation reading y, 8 = q's load into y's bytes (no store: y is clean).  Before the fix
    8 had no dependency and started with 7 (q's data could land before the Scalar engine read
    y); now 8 writes y's bytes too, so it depends on 7 and starts after 7 ends."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = _kernel().run(np.ones((4, 128, F), np.float32),
                          options=Options(target="trn2", timing_only=True))
    tr = r.traces[0]
    assert [i.attr("spill") for i in tr] == [None, None, "store", None, None, None, "load", None,
                                             None, None, None, "load", None]
    y = tr[1].writes[0].tensor
    assert tr[7].engine == "scalar" and tr[7].reads[0].tensor == y
    q_load = tr[8]
    assert q_load.writes[0].tensor != y and q_load.attr("spill") is None
    # the marker: y's whole row (one piece), one element so no cost rule sees it
    assert [(w.tensor, w.start, w.stop, w.elements) for w in q_load.writes[1:]] == \
        [(y, 0, F * 4, 1)]
    deps = dependencies_py(tr)
    assert 7 in deps[8]
    # the dirty case too: z's load (3) waits for y's store (2, its token) and y's readers
    assert 2 in deps[3] and tr[3].writes[1].tensor == y
    tl = estimate([tr], "trn2").cores[0].timeline
    assert tl.start[8] >= tl.end[7] > tl.start[7]


def test_the_marker_changes_only_the_wait():
    """Every instruction lasts as long with the marker as without it; without it, q's load
    starts while the Scalar engine still reads y (the hazard this fixes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = _kernel().run(np.ones((4, 128, F), np.float32),
                           options=Options(target="trn2", timing_only=True)).traces[0]
    with_marker = estimate([tr], "trn2").cores[0].timeline
    tr.patch(8, writes=tr[8].writes[:1])
    without = estimate([tr], "trn2").cores[0].timeline
    np.testing.assert_allclose(with_marker.end - with_marker.start, without.end - without.start)
    assert without.start[8] < without.end[7]


def test_broadcast_copies_are_a_held_site_of_their_own():
    """loop_buffers = 2: a line whose instruction allocates its result r_i and reads a broadcast
    copy c_i per iteration i.  Results: r0 [1, 2], r1 [4, 5], r2 [7, 8]; copies c0 [0, 1],
    c1 [3, 4], c2 [6, 7].  Each is held to the next of its own kind's last use: r0 -> 5,
    r1 -> 8, c0 -> 4, c1 -> 7 (mixed with the results, c0 would be held only to r0's 2)."""
    from trnsim.nki.core.spill import held_until
    from trnsim.source import SourceLoc
    loc = SourceLoc("k.py", 7, "k")
    iv = {1: [1, 2, 64, "t1", loc], 2: [4, 5, 64, "t2", loc], 3: [7, 8, 64, "t3", loc],
          11: [0, 1, 64, "x_pbcast", loc], 12: [3, 4, 64, "x_pbcast", loc],
          13: [6, 7, 64, "x_pbcast", loc]}
    assert held_until(iv, 2) == {1: 5, 2: 8, 11: 4, 12: 7}
