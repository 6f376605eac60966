"""The SBUF spill planner (nki/core/spill.py) on hand-worked tile sets: victims are the window of
contiguous bytes cheapest to evict (bytes moved / distance to next use), not the farthest-used
tile whatever its size; the requester waits for the victims' stores, reloads wait for theirs."""
import numpy as np
import pytest

from trnsim.errors import SbufSpillWarning
from trnsim.nki.core.spill import Move, plan_spills


def _tiles(spec):
    """spec: id -> (bytes, [(position, is_write), ...]) -> (intervals, accesses)."""
    intervals = {sid: [acc[0][0], acc[-1][0], nbytes, f"t{sid}", None]
                 for sid, (nbytes, acc) in spec.items()}
    return intervals, {sid: acc for sid, (_, acc) in spec.items()}


def test_a_small_request_evicts_a_small_victim_not_the_big_tile():
    """10000 B partition: B (6000 B) at 0, next used at 10; s1, s2 (2000 B) at 1, 2, next used
    at 8, 9; r (2000 B) at 3 finds no room.  Cost = bytes moved (store + reload: 2 x bytes of a
    written tile) / distance to next use x (1 + 1 / instructions since last use):
    B 12000/7 x 4/3 = 2286, s1 4000/5 x 3/2 = 1200, s2 4000/6 x 2 = 1333.  s1 goes: stored right
    after its last use (before 2), handing bytes [0, 2000) of r; r dies after 4, so s1 comes
    back into r's bytes before 8.  Belady alone would evict B (12000 B moved instead of 4000)."""
    iv, acc = _tiles({1: (6000, [(0, True), (10, False)]), 2: (2000, [(1, True), (8, False)]),
                      3: (2000, [(2, True), (9, False)]), 4: (2000, [(3, True), (4, False)])})
    plan = plan_spills(iv, acc, 10000, 0)
    assert plan.moves == [Move(2, "store", 2, (4, 0, 2000)), Move(8, "load", 2)]
    assert plan.bytes_per_partition == 4000
    assert plan.offsets == {1: 0, 3: 8000, 4: 6000}   # s1 was evicted: no fixed address
    assert plan.unresolved == 0


def test_a_dma_fixed_cost_makes_one_large_victim_cheaper_than_many_small():
    """8000 B: a..d (1000 B) written at 0..3, next used at 20..23; L (4000 B) written at 4, next
    used at 20; n (4000 B) at 5 needs [0, 4000) (a..d) or [4000, 8000) (L).  Tile i of a..d
    costs 2 (1000 + overhead) / (15 + i) x (1 + 1 / (5 - i)), L 2 (4000 + overhead) / 15 x 2.
    No overhead: a..d 160 + 156.25 + 156.9 + 166.7 = 640 < L 1067: four stores.  A DMA's fixed
    cost worth 10000 B: a..d 1760 + 1719 + 1725 + 1833 = 7038 > L 3733: one store."""
    spec = {i: (1000, [(i, True), (20 + i, False)]) for i in range(4)}
    spec[4] = (4000, [(4, True), (20, False)])
    spec[5] = (4000, [(5, True)])
    iv, acc = _tiles(spec)
    plan = plan_spills(iv, acc, 8000, 0)
    assert [m for m in plan.moves if m.kind == "store"] == [
        Move(i + 1, "store", i, (5, 1000 * i, 1000 * (i + 1))) for i in range(4)]
    plan = plan_spills(iv, acc, 8000, 0, overhead=10000.0)
    assert [m for m in plan.moves if m.kind == "store"] == [Move(5, "store", 4, (5, 0, 4000))]


def test_fragmentation_spills_although_the_live_bytes_fit():
    """7000 B: a [0, 2000) used at 0 and 9, b [2000, 4000) at 1-2, c [4000, 6000) at 1 and 8.
    b dies after 2, so at 3 there are 3000 B free ([2000, 4000) and [6000, 7000)) but d needs
    3000 B contiguous.  Windows: [0, 3000) or [1000, 4000) evict a (4000/6 = 667), any window
    over c costs 4000/5 = 800: a goes (stored after its use at 0), d takes [0, 3000) and waits
    on a's store for bytes [0, 2000) of d; a is reloaded before 9."""
    iv, acc = _tiles({1: (2000, [(0, True), (9, False)]), 2: (2000, [(1, True), (2, False)]),
                      3: (2000, [(1, True), (8, False)]), 4: (3000, [(3, True), (4, False)])})
    plan = plan_spills(iv, acc, 7000, 0)
    assert plan.moves == [Move(1, "store", 1, (4, 0, 2000)), Move(9, "load", 1)]
    assert plan.bytes_per_partition == 4000
    assert plan.offsets[4] == 0


def test_a_clean_reloaded_tile_is_not_stored_again():
    """4000 B: x written at 0, read at 3 and 7; y written at 1, read at 4 and 9; z at 2 finds no
    room: x costs 4000/1 x 3/2 = 6000, y 4000/2 x 2 = 4000 -> y is stored (before 2, handing z
    bytes [0, 2000)).  z dies after 2; y comes back into its bytes before 4 (clean now).  q at
    5: x costs 4000/2 x 3/2 = 3000, y only its reload, 2000/4 x 2 = 1000 -> y goes again without
    a store, and is reloaded before 9 into the bytes q released: 1 store + 2 loads of 2000 B."""
    iv, acc = _tiles({1: (2000, [(0, True), (3, False), (7, False)]),
                      2: (2000, [(1, True), (4, False), (9, False)]),
                      3: (2000, [(2, True), (2, False)]),
                      4: (2000, [(5, True), (6, False)])})
    plan = plan_spills(iv, acc, 4000, 0)
    assert plan.moves == [Move(2, "store", 2, (3, 0, 2000)), Move(4, "load", 2),
                          Move(9, "load", 2)]
    assert plan.bytes_per_partition == 6000
    assert plan.offsets == {1: 0, 3: 2000, 4: 2000}


def test_tiles_in_use_by_the_same_instruction_are_never_victims():
    """4000 B: x (2000 B) used at 0 and 1; y (4000 B) written at 1 with x still in use: the only
    window holds x -> nothing is evicted, the excess is reported as unresolved."""
    iv, acc = _tiles({1: (2000, [(0, True), (1, False)]), 2: (4000, [(1, True)])})
    plan = plan_spills(iv, acc, 4000, 0)
    assert plan.moves == [] and plan.unresolved == 4000


def test_manual_bytes_are_never_handed_out():
    """Manual placements reserve [0, 1000) of 5000 B: two 2000 B tiles fill [1000, 5000); a third
    at 2 evicts the one used later (b, next use 4), whose bytes start at 3000."""
    iv, acc = _tiles({1: (2000, [(0, True), (3, False)]), 2: (2000, [(1, True), (4, False)]),
                      3: (2000, [(2, True)])})
    plan = plan_spills(iv, acc, 5000, 1000)
    assert plan.moves == [Move(2, "store", 2, (3, 0, 2000)), Move(4, "load", 2)]
    assert plan.offsets == {1: 1000, 3: 3000}


def test_in_the_trace_the_requester_and_the_reload_wait_for_the_store():
    """tests/nki/test_capacity_policy.py's four 64 KiB tiles on trn2 (224 KiB): t2 is stored
    (index 3) to make room for t3's load (index 4), t3 (index 5) for acc (first written at 6);
    t2 is reloaded at 7, t3 at 9.  Each requester's first write depends on the store that
    frees its bytes, each reload on its own store."""
    from tests.nki.test_capacity_policy import four_big_tiles
    from trnsim.options import Options
    from trnsim.timing.deps import dependencies_py
    x = np.ones((4, 128, 16384), np.float32)
    with pytest.warns(SbufSpillWarning):
        r = four_big_tiles.run(x, options=Options(target="trn2", timing_only=True))
    tr = r.traces[0]
    assert [ins.attr("spill") for ins in tr] == [None] * 3 + ["store", None, "store", None,
                                                            "load", None, "load", None, None]
    t3, acc = tr[4].writes[0].tensor, tr[6].writes[0].tensor
    assert tr[3].writes[1].tensor == t3 and tr[5].writes[1].tensor == acc   # the token regions
    deps = dependencies_py(tr)
    assert 3 in deps[4] and 5 in deps[6]     # requester waits for the victim's store
    assert 3 in deps[7] and 5 in deps[9]     # reload waits for its store


def test_held_copies_of_a_loop_tile():
    """loop_buffers = 2: the tile a source line allocates stays until the next one from that line
    is done.  Line 10 allocates at 0, 3, 6 (last uses 1, 4, 7): held until 4 and 7; the last
    is not extended; line 20's single tile is not extended."""
    from trnsim.nki.core.spill import held_until
    from trnsim.source import SourceLoc
    at = lambda line: SourceLoc("k.py", line, "k")
    iv = {1: [0, 1, 100, "a", at(10)], 2: [3, 4, 100, "b", at(10)], 3: [6, 7, 100, "c", at(10)],
          4: [0, 9, 100, "d", at(20)]}
    assert held_until(iv, 1) == {}
    assert held_until(iv, 2) == {1: 4, 2: 7}
    assert held_until(iv, 3) == {1: 7, 2: 7}


def test_a_held_copy_is_never_a_victim_so_the_long_lived_tile_spills():
    """4000 B: x (line 10, 2000 B) at 0-1, held (loop_buffers 2) until y (line 10) is done at 3;
    z (2000 B) lives from 0 to 4.  y at 2 needs room: x is held, so z goes (stored after its use
    at 0, handing y its bytes) and comes back before 4.  Without holding, y takes x's bytes."""
    iv, acc = _tiles({1: (2000, [(0, True), (1, False)]), 2: (2000, [(0, True), (4, False)]),
                      3: (2000, [(2, True), (3, False)])})
    assert plan_spills(iv, acc, 4000, 0).moves == []
    plan = plan_spills(iv, acc, 4000, 0, hold={1: 3})
    assert plan.moves == [Move(1, "store", 2, (3, 0, 2000)), Move(4, "load", 2)]


def test_a_held_copy_gives_way_when_nothing_else_can():
    """As above but z is used at 2 too: the only victim left is the held x, whose values are
    dead: it gives way with no DMA."""
    iv, acc = _tiles({1: (2000, [(0, True), (1, False)]), 2: (2000, [(0, True), (2, False)]),
                      3: (2000, [(2, True), (3, False)])})
    plan = plan_spills(iv, acc, 4000, 0, hold={1: 3})
    assert plan.moves == [] and plan.unresolved == 0 and plan.offsets[3] == 0


_LB2_KERNEL = '''
import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def held(x, w1, w2):
    out = nl.ndarray((3, 128, 12288), dtype=x.dtype, buffer=nl.shared_hbm)
    l1 = nl.ndarray((128, 12288), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=l1, src=w1)
    l2 = nl.ndarray((128, 12288), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=l2, src=w2)
    for i in range(3):
        t = nl.ndarray((128, 12288), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        u = nl.ndarray((128, 12288), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=u, data1=t, data2=l1, op=nl.multiply)
        nisa.dma_copy(dst=out[i], src=u)
    r = nl.ndarray((128, 12288), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r, data1=l1, data2=l2, op=nl.add)
    nisa.dma_copy(dst=out[0], src=r)
    return out
'''


def _held_module(tmp_path):
    """The module of _LB2_KERNEL, written to ``tmp_path`` (the CLI test runs the same file)."""
    import importlib.util
    import trnsim.compat
    trnsim.compat.install()
    k = tmp_path / "held.py"
    k.write_text(_LB2_KERNEL)
    spec = importlib.util.spec_from_file_location("held_kernel", k)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_loop_buffers_from_the_hardware_file_spill_the_long_lived_tile(tmp_path):
    """New API, trn2 (224 KiB): l1, l2 (48 KiB) loaded at 0, 1; three iterations load t (48 KiB)
    and make u = t * l1 (48 KiB); l1 + l2 at the end.  Single-copy peak 4 x 48 = 192 KiB: no
    spill.  With loop_buffers = 2 the previous t and u stay: loading t1 (at 5) finds 32 KiB free
    with t0, u0 held and l1 next used at 6 -> l2 (next used at 11) is stored right after its
    load and reloaded before the final add; later the held copies give way (no DMA)."""
    from trnsim.options import Options
    kernel = _held_module(tmp_path).held
    x = np.ones((3, 128, 12288), np.float32)
    w = np.ones((128, 12288), np.float32)
    tr = kernel.run(x, w, w, options=Options(target="trn2", timing_only=True)).traces[0]
    assert "sbuf_spill_cause" not in tr.meta and not any(ins.attr("spill") for ins in tr)
    hw = tmp_path / "lb2.toml"
    hw.write_text('[cores.v3.sbuf]\nloop_buffers = { value = 2, source = "choice: test" }\n')
    tr = kernel.run(x, w, w, options=Options(target="trn2", timing_only=True,
                                             hardware_file=str(hw))).traces[0]
    assert tr.meta["sbuf_spill_cause"] == "loop_buffers"
    spills = [(ins.index, ins.attr("spill")) for ins in tr if ins.attr("spill")]
    assert spills == [(2, "store"), (12, "load")]
    l2 = tr[1].writes[0].tensor
    assert tr[2].reads[0].tensor == l2 and tr[12].writes[0].tensor == l2
    assert tr[2].writes[1].tensor == tr[6].writes[0].tensor   # t1 waits for l2's store
    assert tr.meta["sbuf_spill_traffic_bytes"] == 2 * 128 * 49152


def test_loop_buffers_must_be_positive(tmp_path):
    from trnsim.errors import HardwareFileError
    from trnsim.hardware import load_catalog
    hw = tmp_path / "bad.toml"
    hw.write_text('[cores.v3.sbuf]\nloop_buffers = { value = 0, source = "choice: test" }\n')
    with pytest.raises(HardwareFileError) as ei:
        load_catalog(str(hw))
    assert ei.value.value == 0 and "loop_buffers" in str(ei.value)


def test_tiles_are_cut_at_the_bytes_their_instructions_touch():
    """A 4000 B tile live over [0, 5]: written whole at 0, its first half read at 2, its second
    at 5 (an access at 7, outside the live range, does not count): two 2000 B pieces, the first
    last used at 2, the second at 5."""
    from trnsim.nki.core.spill import split_pieces
    iv = {7: [0, 5, 4000, "t", None]}
    rng = {7: [(0, True, 0, 4000), (2, False, 0, 2000), (5, False, 2000, 4000),
               (7, False, 0, 1000)]}
    p_iv, p_acc, spans = split_pieces(iv, rng)
    assert spans == {0: (7, 0, 2000), 1: (7, 2000, 4000)}
    assert [p_iv[0][:3], p_iv[1][:3]] == [[0, 2, 2000], [0, 5, 2000]]
    assert p_acc == {0: [(0, True), (2, False)], 1: [(0, True), (5, False)]}


def test_only_the_piece_needed_later_moves():
    """6000 B: tile T (4000 B, pieces P0 used at 0, 2 and P1 used at 0, 8) made at 0 as one block
    [0, 4000); X (2000 B) at 1, next used at 9.  At 3 Y (4000 B) finds [0, 2000) free (P0 died
    after 2): window [0, 4000) evicts P1 (2 x 2000 / 5 x 4/3 = 1067), [2000, 6000) P1 and X
    (1067 + 4000/6 x 3/2 = 2067).  Only P1's 2000 B move: stored after 0, handing Y bytes
    [2000, 4000), reloaded before 8.  In the trace the store reads T's bytes [2000, 4000)."""
    from trnsim.nki.core.spill import spill_instructions
    iv, acc = _tiles({0: (2000, [(0, True), (2, False)]), 1: (2000, [(0, True), (8, False)]),
                      2: (2000, [(1, True), (9, False)]), 3: (4000, [(3, True), (4, False)])})
    plan = plan_spills(iv, acc, 6000, 0, blocks={0: [0, 1]})
    assert plan.moves == [Move(1, "store", 1, (3, 2000, 4000)), Move(8, "load", 1)]
    assert plan.offsets == {0: 0, 2: 4000, 3: 0}
    tiles = {10: ("T", 128, 4000, None), 11: ("X", 128, 2000, None), 12: ("Y", 128, 4000, None)}
    spans = {0: (10, 0, 2000), 1: (10, 2000, 4000), 2: (11, 0, 2000), 3: (12, 0, 4000)}
    (pos, st), (pos2, ld) = spill_instructions(plan, tiles, 0, spans)
    sb, hb, tok = st.reads[0], st.writes[0], st.writes[1]
    assert (pos, sb.tensor, sb.start, sb.stop, sb.elements) == (1, 10, 2000, 4000, 128 * 2000)
    assert (hb.memory, hb.start, hb.stop) == ("hbm", 128 * 2000, 128 * 4000)
    assert (tok.tensor, tok.start, tok.stop) == (12, 2000, 4000)
    assert (pos2, ld.reads[0], ld.writes[0]) == (8, hb, sb)


def _cli(args):
    """(exit code, stdout) of ``trnsim`` run in-process."""
    import io
    from contextlib import redirect_stdout
    from trnsim.cli.main import main
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(args)
    return code, buf.getvalue()


def test_spills_without_overflow_are_in_the_summary_and_the_cli(tmp_path):
    """The held-copy spills above (one store and one reload of l2, 48 KiB per partition each)
    reach the estimate summary and the kernel table, not only the trace meta: 2 DMAs,
    2 x 128 x 49152 B = 12 MiB, cause loop_buffers; none under the default hardware."""
    import json
    from trnsim.options import Options
    from trnsim.timing.estimate import estimate
    mod = _held_module(tmp_path)
    k = tmp_path / "held.py"
    hw = tmp_path / "lb2.toml"
    hw.write_text('[cores.v3.sbuf]\nloop_buffers = { value = 2, source = "choice: test" }\n')
    x = np.ones((3, 128, 12288), np.float32)
    w = np.ones((128, 12288), np.float32)
    run = mod.held.run(x, w, w, options=Options(target="trn2", timing_only=True,
                                                 hardware_file=str(hw)))
    spill_dmas = [ins for ins in run.traces[0] if ins.attr("spill")]
    f = estimate(run.traces, "trn2").figures()
    assert f.sbuf_spill_dmas == len(spill_dmas) == 2
    assert f.sbuf_spill_traffic_bytes == 2 * 128 * 49152
    assert f.sbuf_spill_cause == "loop_buffers"
    args = ["kernel", f"{k}::held", "--arg", "x=3x128x12288:float32", "--arg",
            "w1=128x12288:float32", "--arg", "w2=128x12288:float32", "--timing-only",
            "--target", "trn2"]
    code, out = _cli(args + ["--hardware", str(hw), "--json"])
    summ = json.loads(out)
    summ = summ.get("summary", summ)
    assert code == 0 and summ["sbuf_spill_dmas"] == 2 and summ["sbuf_spill_cause"] == "loop_buffers"
    code, out = _cli(args + ["--hardware", str(hw)])
    assert code == 0 and "2 DMAs, 12.0 MiB" in out and "(loop_buffers)" in out
    code, out = _cli(args + ["--json"])
    summ = json.loads(out)
    summ = summ.get("summary", summ)
    assert code == 0 and summ["sbuf_spill_dmas"] == 0 and summ["sbuf_spill_cause"] == ""
    code, out = _cli(args)
    assert code == 0 and "SBUF spills" not in out
