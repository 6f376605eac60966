"""PSUM liveness under the compiler's reordering (trnsim/nki/core/liveness.py, cores.toml
``[vN.psum] liveness``): accumulators filled in one loop and evacuated in a later one fit once each
evacuation is hoisted to just after its tile's last matmul; accumulators that every order must hold
at once are still refused.  Peaks are hand-computed: one (128, 512) fp32 PSUM tile is 2048 B per
partition (one bank), trn2 PSUM is 8 banks = 16384 B."""
import textwrap

import numpy as np
import pytest

import trnsim.frontends.nki as nki
from trnsim.errors import CapacityError, HardwareFileError
from trnsim.hardware import get_core
from trnsim.nki.core.liveness import hoisted_ranges, sweep_peak
from trnsim.ir.trace import Instruction, Region
from trnsim.options import Options

nl = nki.language
nisa = nki.isa

N_ACC, K = 12, 2
BANK = 128 * 512 * 4 // 128   # bytes per partition of a (128, 512) fp32 tile


@nki.jit
def fill_then_evacuate(w, x):
    """The shape of nki-library bwmm_shard_on_I's gate/up projection: N_ACC accumulators, all
    filled in one loop, all evacuated in a later loop."""
    out = nl.ndarray((N_ACC, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ws = [nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf) for _ in range(N_ACC)]
    xs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf) for _ in range(K)]
    for j in range(N_ACC):
        nisa.dma_copy(dst=ws[j], src=w[j])
    for k in range(K):
        nisa.dma_copy(dst=xs[k], src=x[k])
    acc = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(N_ACC)]
    for j in range(N_ACC):
        for k in range(K):
            nisa.nc_matmul(dst=acc[j], stationary=ws[j], moving=xs[k])
    for j in range(N_ACC):
        r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=acc[j])
        nisa.dma_copy(dst=out[j], src=r)
    return out


N_TRUE = 9


@nki.jit
def nine_partial_sums(w, x):
    """Step 0 writes 9 accumulators; their sum (read from all 9) is the moving input of step 1,
    which accumulates into the same 9.  Every order holds the 9 partial sums at once: each is
    written before the sum is complete and accumulated into after it."""
    out = nl.ndarray((N_TRUE, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ws = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    x0 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x0, src=x)
    acc = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(N_TRUE)]
    for j in range(N_TRUE):
        nisa.nc_matmul(dst=acc[j], stationary=ws, moving=x0)
    s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=acc[0])
    for j in range(1, N_TRUE):
        nisa.tensor_tensor(dst=s, data1=s, data2=acc[j], op=nl.add)
    for j in range(N_TRUE):
        nisa.nc_matmul(dst=acc[j], stationary=ws, moving=s)
    for j in range(N_TRUE):
        r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=acc[j])
        nisa.dma_copy(dst=out[j], src=r)
    return out


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(N_ACC, 128, 128)).astype(np.float32) * 0.1,
            rng.normal(size=(K, 128, 512)).astype(np.float32))


def test_the_data_file_picks_hoisting_for_psum():
    for target in ("trn1", "trn2", "trn3"):
        c = get_core(target)
        assert c.psum.liveness == "hoist_last_reader" and c.sbuf.liveness == "program_order"


def test_accumulators_evacuated_in_a_later_loop_fit_once_evacuations_are_hoisted():
    w, x = _inputs()
    r = fill_then_evacuate.run(w, x, options=Options(target="trn2"))
    # numbers: out[j] = w[j].T @ (x[0] + x[1])
    want = np.einsum("jkp,kf->jpf", w, x.sum(axis=0))
    np.testing.assert_allclose(r.outputs, want, rtol=2e-4, atol=2e-4)
    meta = r.traces[0].meta
    # hand count: evacuation j moves to just after acc[j]'s 2nd matmul, so acc[j] lives from its
    # 1st to its 2nd matmul and acc[j+1] starts after: one bank at a time
    assert meta["psum_peak_bytes_per_partition"] == BANK
    assert meta["psum_liveness"] == "hoist_last_reader"


def test_program_order_override_refuses_the_same_kernel(tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text(textwrap.dedent("""
        [cores.v3.psum]
        liveness = { value = "program_order", source = "choice: test" }
        """))
    w, x = _inputs()
    with pytest.raises(CapacityError) as ei:
        fill_then_evacuate.run(w, x, options=Options(target="trn2", hardware_file=str(hw)))
    e = ei.value
    # program order: all 12 allocated before the first matmul; the 9th overflows 8 banks
    assert e.rule == "psum-capacity" and e.limit == f"{8 * BANK} B per partition"
    assert e.value == f"{9 * BANK} B per partition"


def test_partial_sums_every_order_holds_at_once_are_refused_naming_the_rule():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(128, 128)).astype(np.float32)
    x = rng.normal(size=(128, 512)).astype(np.float32)
    with pytest.raises(CapacityError) as ei:
        nine_partial_sums.run(w, x, options=Options(target="trn2"))
    e = ei.value
    msg = str(e)
    assert e.rule == "psum-capacity" and msg.startswith("[psum-capacity]")
    assert e.limit == f"{8 * BANK} B per partition" and f"{8 * BANK} B per partition" in msg
    # 9 banks live at the sum: written by step 0, accumulated into by step 1
    assert e.value == f"{9 * BANK} B per partition" and f"{9 * BANK} B per partition" in msg
    assert "hoist_last_reader" in msg


def test_eight_partial_sums_fit():
    """The same dependency pattern with 8 accumulators needs exactly 8 banks: accepted, peak 8."""
    @nki.jit
    def eight(w, x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        ws = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w)
        x0 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x0, src=x)
        acc = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
        for j in range(8):
            nisa.nc_matmul(dst=acc[j], stationary=ws, moving=x0)
        s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=acc[0])
        for j in range(1, 8):
            nisa.tensor_tensor(dst=s, data1=s, data2=acc[j], op=nl.add)
        nisa.dma_copy(dst=out, src=s)
        return out

    rng = np.random.default_rng(2)
    w = rng.normal(size=(128, 128)).astype(np.float32)
    x = rng.normal(size=(128, 512)).astype(np.float32)
    r = eight.run(w, x, options=Options(target="trn2"))
    np.testing.assert_allclose(r.outputs, 8 * (w.T @ x), rtol=1e-4, atol=1e-3)
    assert r.traces[0].meta["psum_peak_bytes_per_partition"] == 8 * BANK


def test_unknown_or_sbuf_liveness_rule_is_refused(tmp_path):
    from trnsim.hardware import load_catalog
    for i, (mem, value) in enumerate((("psum", "asap"), ("sbuf", "hoist_last_reader"))):
        hw = tmp_path / f"hw{i}.toml"
        hw.write_text(f'[cores.v3.{mem}]\nliveness = {{ value = "{value}", source = "choice: test" }}\n')
        with pytest.raises(HardwareFileError) as ei:
            load_catalog(str(hw))
        assert ei.value.rule == "hardware-file-range" and ei.value.value == value
        assert f"{mem}.liveness" in str(ei.value)


# -- the reordering itself, on hand-built traces ------------------------------------------------
def _reg(mem, tensor, start=0, stop=2048):
    return Region(mem, tensor, f"t{tensor}", 0, 128, start, stop, 128 * (stop - start) // 4,
                  "float32", stop - start)


def _ins(i, reads, writes, **attrs):
    return Instruction(i, "vector", "op", tuple(reads), tuple(writes), 128, 512, "float32",
                       "float32", tuple(attrs.items()), None)


def test_a_moved_instruction_waits_for_every_conflicting_access_not_only_the_latest():
    """0 writes S; 1 writes P; 2 reads S; 3 reads S and P (moved: just after 1); 4 writes S and a
    fresh U (moved: write-after-read with the reads at 2 and 3, so after 2, although the latest
    of them, 3, now sits at 1)."""
    S, P, U = ("sbuf", 1), ("psum", 2), ("sbuf", 3)
    trace = [_ins(0, [], [_reg(*S)]), _ins(1, [], [_reg(*P)]), _ins(2, [_reg(*S)], []),
             _ins(3, [_reg(*S), _reg(*P)], []), _ins(4, [], [_reg(*S), _reg(*U)])]
    got = hoisted_ranges(trace, 0, {3, 4}, {S: 0, P: 1, U: 0})
    assert got[U] == [2, 2]
    assert got[P] == [1, 1]     # written at 1, last read (3) moved to just after 1
    assert got[S] == [0, 2]


def test_zeroing_at_allocation_counts_from_the_allocation():
    P = ("psum", 5)
    trace = [_ins(0, [], []), _ins(1, [], []),
             _ins(2, [], [_reg(*P)], deferred_zero=True), _ins(3, [_reg(*P)], [])]
    got = hoisted_ranges(trace, 0, {3}, {P: 0})
    assert got[P] == [0, 2]      # zeroed where allocated (0); read moved to just after 2


def test_sweep_peak_counts_overlapping_ranges():
    peak, at = sweep_peak([(0, 4, 10, "a"), (2, 6, 20, "b"), (5, 9, 30, "c"), (7, 8, 1, "d")], 3)
    # a ends before c starts (last 4 < 5), b before d: the peak is b + c over the reserve
    assert peak == 3 + 20 + 30 and at[0] == "c"


LEGACY_FILL_THEN_EVACUATE = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

@nki.jit
def kernel(w, x):
    out = nl.ndarray((12, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(12)]
    for j in range(12):
        for k in nl.affine_range(6):
            acc[j] += nisa.nc_matmul(nl.load(w[k]), nl.load(x[k]))
    for j in range(12):
        nl.store(out[j], value=nl.copy(acc[j]))
    return out
'''


def test_legacy_kernel_with_fast_forwarded_loops_is_traced_again_and_fits(tmp_path):
    """The same pattern in the legacy API: 12 nl.zeros accumulators (the zeroing folded into the
    first matmul), each filled by an affine_range loop that a timing-only run fast-forwards; program
    order overflows, so the run is traced again in full and checked under the hoisted order: one
    bank at a time."""
    from trnsim import api
    p = tmp_path / "legacy_fill.py"
    p.write_text(LEGACY_FILL_THEN_EVACUATE)
    k = api.load_kernel(str(p), "kernel")
    rng = np.random.default_rng(3)
    w = rng.normal(size=(6, 128, 128)).astype(np.float32)
    x = rng.normal(size=(6, 128, 512)).astype(np.float32)
    r = k.run(w, x, options=Options(target="trn2", timing_only=True))
    assert r.options.fast_forward == "off"   # traced again without fast-forwarding
    assert r.traces[0].meta["psum_peak_bytes_per_partition"] == BANK
    r = k.run(w, x, options=Options(target="trn2"))
    want = np.einsum("kpm,kpf->mf", w, x)
    np.testing.assert_allclose(r.outputs, np.broadcast_to(want, (12, 128, 512)), rtol=1e-3, atol=1e-2)
    assert r.traces[0].meta["psum_liveness"] == "hoist_last_reader"
