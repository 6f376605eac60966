"""SBUF overflow: the legacy API fails (tests/nki/broken/sbuf_overflow.py); the new API's compiler
spills to HBM, so trnsim warns with the excess instead of failing."""
import numpy as np
import pytest

from trnsim.errors import SbufSpillWarning
import trnsim.frontends.nki as nki
from trnsim.options import Options

nl = nki.language
nisa = nki.isa


@nki.jit
def four_big_tiles(x):
    out = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = []
    for i in range(4):
        t = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.sbuf)   # 64 KiB per partition
        nisa.dma_copy(dst=t, src=x[i])
        tiles.append(t)
    acc = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=acc, data1=tiles[0], data2=tiles[1], op=nl.add)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=tiles[2], op=nl.add)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=tiles[3], op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_new_api_sbuf_overflow_warns_with_the_excess():
    x = np.ones((4, 128, 16384), np.float32)
    with pytest.warns(SbufSpillWarning) as rec:
        r = four_big_tiles.run(x, options=Options(target="trn2", timing_only=True))
    # five 64 KiB tiles live at the peak (the four inputs and acc): 320 KiB vs 224 KiB on trn2
    peak = 5 * 16384 * 4
    cap = 224 * 1024
    msg = str(rec[0].message)
    assert f"{peak} B per partition" in msg and f"{peak - cap} B per partition" in msg
    assert r.traces[0].meta["sbuf_spill_bytes_per_partition"] == peak - cap
    assert r.traces[0].meta["sbuf_peak_bytes_per_partition"] == peak
    assert r.traces[0].meta["sbuf_spill_cause"] == "overflow"


def test_new_api_within_capacity_does_not_warn():
    import warnings
    x = np.ones((2, 128, 16384), np.float32)

    @nki.jit
    def two_tiles(x):
        out = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[0])
        nisa.dma_copy(dst=b, src=x[1])
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=out, src=a)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error", SbufSpillWarning)
        r = two_tiles.run(x, options=Options(target="trn2", timing_only=True))
    assert "sbuf_spill_bytes_per_partition" not in r.traces[0].meta
    assert r.traces[0].meta["sbuf_peak_bytes_per_partition"] == 2 * 65536


def test_spill_stores_and_reloads_follow_the_fewest_reloads_rule():
    """Hand-worked: four 64 KiB tiles t0..t3 loaded at 0..3, acc (64 KiB) made at 4 from t0+t1,
    then acc+=t2 at 5, acc+=t3 at 6, stored at 7; trn2 has 224 KiB.  Loading t3 needs room: of
    t0, t1 (next use 4) and t2 (next use 5) the farthest is t2 (equal sizes: spill.py's cost
    2 (bytes + DMA overhead) / distance x (1 + 1 / since) is t0 4/3, t1 3/2, t2 1 unit) -> stored
    before instruction 3.
    At 4 acc needs room: t3 (next use 6) is farthest -> stored before 4.  t0, t1 die after 4, so
    t2 is reloaded before 5 and t3 before 6: 2 stores + 2 reloads of 64 KiB per partition."""
    x = np.ones((4, 128, 16384), np.float32)
    with pytest.warns(SbufSpillWarning):
        r = four_big_tiles.run(x, options=Options(target="trn2", timing_only=True))
    tr = r.traces[0]
    kinds = [dict(ins.attrs).get("spill", ins.opcode) for ins in tr]
    assert kinds == ["dma_copy", "dma_copy", "dma_copy", "store", "dma_copy", "store",
                     "tensor_tensor", "load", "tensor_tensor", "load", "tensor_tensor", "dma_copy"]
    assert [ins.index for ins in tr] == list(range(12))
    t2 = tr[2].writes[0].tensor
    t3 = tr[4].writes[0].tensor
    assert tr[3].reads[0].tensor == t2 and tr[7].writes[0].tensor == t2
    assert tr[5].reads[0].tensor == t3 and tr[9].writes[0].tensor == t3
    assert tr.meta["sbuf_spill_traffic_bytes"] == 4 * 128 * 65536
    # the reload of t2 precedes its use and the use depends on it
    from trnsim.timing import estimate_run
    from trnsim.timing.deps import dependencies
    deps = dependencies(tr)
    assert 7 in deps[8] and 9 in deps[10]
    est = estimate_run(r)
    assert est.figures().hbm_bytes >= 4 * 128 * 65536 + 5 * 128 * 65536


LEGACY_FOUR_TILES = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def kernel(x):
    out = nl.ndarray((128, 16384), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0])
    b = nl.load(x[1])
    c = nl.load(x[2])
    d = nl.load(x[3])
    s = nl.add(nl.add(a, b), nl.add(c, d))
    nl.store(out, value=s)
    return out
'''


def _legacy_four_tiles(tmp_path, hw=None):
    from trnsim import api
    p = tmp_path / "legacy_four.py"
    p.write_text(LEGACY_FOUR_TILES)
    k = api.load_kernel(str(p), "kernel")
    return k.run(np.ones((4, 128, 16384), np.float32),
                 options=Options(target="trn2", timing_only=True, hardware_file=hw))


def test_legacy_overflow_fails_by_default_and_spills_when_the_core_data_says_so(tmp_path):
    """cores.toml [vN.sbuf] legacy_overflow: "fail" (default) raises; "spill" (what the neuronxcc
    programming model describes) warns and times the spill DMAs.  Hand count (program order):
    loads a..d at 0..3, a+b at 4, c+d at 5, their sum at 6; a result is counted from the
    instruction after the one that makes it, so the peak is a, b, c, d: 4 x 64 KiB.  Fewest
    reloads: loading d needs room; of a, b (next use 4) and c (next use 5) c goes out (one store)
    and comes back before c+d (one reload)."""
    from trnsim.errors import CapacityError
    with pytest.raises(CapacityError) as ei:
        _legacy_four_tiles(tmp_path)
    assert ei.value.rule == "sbuf-capacity"
    hw = tmp_path / "spill.toml"
    hw.write_text('[cores.v3.sbuf]\nlegacy_overflow = { value = "spill", source = "choice: test" }\n')
    with pytest.warns(SbufSpillWarning) as rec:
        r = _legacy_four_tiles(tmp_path, str(hw))
    peak, cap = 4 * 65536, 224 * 1024
    meta = r.traces[0].meta
    assert meta["sbuf_peak_bytes_per_partition"] == peak
    assert meta["sbuf_spill_bytes_per_partition"] == peak - cap
    assert f"{peak - cap} B per partition" in str(rec[0].message)
    spills = [ins.attr("spill") for ins in r.traces[0] if ins.attr("spill")]
    assert spills == ["store", "load"]
    assert meta["sbuf_spill_traffic_bytes"] == 2 * 128 * 65536


def test_legacy_overflow_values_are_checked(tmp_path):
    from trnsim.errors import HardwareFileError
    from trnsim.hardware import load_catalog
    for i, (mem, value) in enumerate((("sbuf", "maybe"), ("psum", "spill"))):
        hw = tmp_path / f"bad{i}.toml"
        hw.write_text(f'[cores.v3.{mem}]\nlegacy_overflow = {{ value = "{value}", source = "choice: test" }}\n')
        with pytest.raises(HardwareFileError) as ei:
            load_catalog(str(hw))
        assert ei.value.rule == "hardware-file-range" and ei.value.value == value
