"""Physical placement of automatically allocated SBUF tiles (nki/core/placement.py): offsets worked
out by hand from the rule (first fit over free byte ranges, least recently released first, never-used
bytes oldest), the map a kernel instance records, and the policy's check in hardware files."""
import numpy as np
import pytest

from trnsim.errors import HardwareFileError, TrnsimError
from trnsim.hardware.catalog import load_catalog
from trnsim.nki.core.placement import place_lru
from trnsim.options import Options


def test_room_to_spare_rotates_through_fresh_bytes():
    # three 1000 B tiles, each dead before the next is allocated, in a 10000 B partition: the
    # never-used bytes above count as oldest, so each tile gets new bytes
    got = place_lru([(0, 1, 1000, 1), (2, 3, 1000, 2), (4, 5, 1000, 3)], 10000)
    assert got == {1: 0, 2: 1000, 3: 2000}


def test_large_tiles_reuse_the_bytes_just_released():
    # 6000 B tiles in 10000 B: the 4000 B never used cannot hold one, so each reuses offset 0
    got = place_lru([(0, 1, 6000, 1), (2, 3, 6000, 2), (4, 5, 6000, 3)], 10000)
    assert got == {1: 0, 2: 0, 3: 0}


def test_least_recently_released_range_first():
    # a, b, c fill 3000 B; b is released at 2, c at 3, a at 6.  d (at 6) takes b's bytes (oldest
    # release); e (at 8, after d's release at 8) takes c's (released at 3, older than a's 6 and d's 8)
    rng = [(0, 5, 1000, "a"), (0, 1, 1000, "b"), (0, 2, 1000, "c"), (6, 7, 1000, "d"),
           (8, 9, 1000, "e")]
    assert place_lru(rng, 3000) == {"a": 0, "b": 1000, "c": 2000, "d": 1000, "e": 2000}


def test_manual_reservation_and_no_room():
    # manual placements reserve [0, 4000): automatic tiles start above; a tile that finds no free
    # range (5000 B while 3000 B are free) keeps its private storage (absent from the map)
    got = place_lru([(0, 3, 3000, 1), (1, 2, 5000, 2)], 10000, reserved=4000)
    assert got == {1: 4000}


def test_adjacent_released_ranges_join_for_a_larger_tile():
    got = place_lru([(0, 1, 1000, 1), (0, 1, 1000, 2), (2, 3, 2000, 3)], 2000)
    assert got == {1: 0, 2: 1000, 3: 0}


def _legacy():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    return nki, nl


def lru_file(tmp_path, policy="reuse_lru"):
    """A hardware file setting every core's SBUF placement policy."""
    p = tmp_path / f"placement_{policy}.toml"
    p.write_text("".join(f'[cores.{c}.sbuf]\nplacement = {{ value = "{policy}", source = "test" }}\n'
                         for c in ("v2", "v3", "v4")))
    return str(p)


def test_kernel_records_the_map_only_under_reuse_lru(tmp_path):
    nki, nl = _legacy()

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.load(x[i])
            nl.store(out[i], value=t)
        return out

    x = np.ones((4, 128, 25600), np.float32)   # 100 KiB per partition: two do not fit 192 KiB
    priv = k.run(x, options=Options(target="trn1"))
    assert "sbuf_placement" not in priv.traces[0].meta
    run = k.run(x, options=Options(target="trn1", hardware_file=lru_file(tmp_path)))
    np.testing.assert_array_equal(run.outputs if not isinstance(run.outputs, tuple)
                                  else run.outputs[0], x)   # numerics keep logical tiles
    flat = run.traces[0].meta["sbuf_placement"]
    assert len(flat) == 4 * 3
    assert len({flat[k] for k in range(0, 12, 3)}) == 4          # four tiles
    assert len({flat[k + 1] for k in range(0, 12, 3)}) == 1      # one physical buffer
    assert [flat[k + 2] for k in range(0, 12, 3)] == [0, 0, 0, 0]


def test_unknown_policy_in_a_hardware_file_is_refused(tmp_path):
    with pytest.raises(HardwareFileError) as e:
        load_catalog(lru_file(tmp_path, "round_robin"))
    assert isinstance(e.value, TrnsimError)
    assert e.value.rule == "hardware-file-range" and "round_robin" in str(e.value.value)


def test_opt_in_example_file_selects_reuse_lru_on_every_core():
    import os
    import trnsim.hardware
    ex = os.path.join(os.path.dirname(trnsim.hardware.__file__), "examples", "sbuf-reuse-lru.toml")
    cat = load_catalog(ex)
    assert {c.sbuf.placement for c in cat.cores.values()} == {"reuse_lru"}
    assert {c.sbuf.placement for c in load_catalog(None).cores.values()} == {"private"}
