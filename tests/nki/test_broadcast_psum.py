"""A partition broadcast's PSUM copy is a PSUM tile: the capacity check, the peak and the profile's
occupancy over time count it, and where PSUM cannot hold it the copy is made by DMA into SBUF
(cores.toml [vN.broadcast] partition: the fallback "where PSUM cannot hold or serve it")."""
import numpy as np
import pytest

from trnsim.errors import CapacityError
from trnsim.options import Options
from trnsim.profile.insight.occupancy import series
from trnsim.timing import estimate


def _legacy():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    return nki, nisa, nl


def _one_broadcast():
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, row):
        out = nl.ndarray((128, 1024), dtype=x.dtype, buffer=nl.shared_hbm)
        y = nisa.tensor_tensor(nl.load(x), nl.load(row).broadcast_to((128, 1024)), op=nl.multiply)
        nl.store(out, y)
        return out

    return k


def test_the_copy_is_in_the_psum_peak_and_the_occupancy_series():
    """1024 fp32 columns: the copy is 1024 x 4 = 4096 B per partition of PSUM (two banks of
    2 KiB), live from its first matmul to the tensor_tensor reading it; the kernel has no other
    PSUM tile, so the PSUM peak and the occupancy series' peak are 4096 B."""
    x = np.ones((128, 1024), np.float32)
    row = np.ones((1, 1024), np.float32)
    tr = _one_broadcast().run(x, row, options=Options(target="trn1")).traces[0]
    bc = [i.index for i in tr if i.opcode == "partition_broadcast"]
    consumer = next(i.index for i in tr if i.opcode == "tensor_tensor")
    assert len(bc) == 2
    assert tr.meta["psum_peak_bytes_per_partition"] == 4096
    live = np.asarray(tr.meta["psum_live"]).reshape(-1, 3).tolist()
    assert live == [[bc[0], consumer, 4096]]
    tl = estimate([tr], "trn1").cores[0].timeline
    s = series(tr, tl, "psum", 16384, 0)
    assert s["peak"] == 4096
    during = [b for t, b in zip(s["t_ns"], s["bytes_per_partition"])
              if tl.start[bc[0]] <= t <= tl.start[consumer]]
    assert during and max(during) == 4096
    assert s["bytes_per_partition"][-1] == 0     # freed after its consumer


def _psum_full(nl_zeros_banks=8):
    """``nl_zeros_banks`` accumulators of one 2 KiB bank each, live across the broadcast's
    consumer (each evacuation needs the consumer's result, so none can be hoisted above it)."""
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, row, w):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        accs = [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                for _ in range(nl_zeros_banks)]
        wt = nl.load(w)
        for a in accs:
            a += nisa.nc_matmul(wt, nl.load(x))
        y = nisa.tensor_tensor(nl.load(x), nl.load(row).broadcast_to((128, 512)), op=nl.multiply)
        s = y
        for a in accs:
            s = nl.add(s, a)
        nl.store(out, s)
        return out

    return k


def _run_full(banks):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    row = rng.standard_normal((1, 512)).astype(np.float32)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    run = _psum_full(banks).run(x, row, w, options=Options(target="trn1"))
    out = run.outputs[0] if isinstance(run.outputs, tuple) else run.outputs
    ref = x * row + banks * (w.T.astype(np.float64) @ x)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)
    return run.traces[0]


def test_a_kernel_using_all_psum_gets_the_dma_copy_instead():
    """8 accumulators x 2048 B = 16384 B: all of PSUM. The copy (512 x 4 = 2048 B) would make
    18432 B, so it is made by DMA into SBUF (512 fp32 = 2048 B per partition there) and the
    consumer reads SBUF; PSUM holds exactly the accumulators."""
    tr = _run_full(8)
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert [(i.engine, i.attr("psum_full")) for i in bc] == [("dma", True)]
    w = bc[0].writes[0]
    assert (w.memory, w.partitions, w.start, w.stop, w.dtype) == ("sbuf", 128, 0, 2048, "float32")
    tt = next(i for i in tr if i.opcode == "tensor_tensor" and i.attr("op") == "multiply")
    assert (tt.reads[1].memory, tt.reads[1].tensor, tt.reads[1].stop) == ("sbuf", w.tensor, 2048)
    assert tr.meta["psum_peak_bytes_per_partition"] == 16384
    sb = np.asarray(tr.meta["sbuf_live"]).reshape(-1, 3).tolist()
    assert [bc[0].index, tt.index, 2048] in sb          # counted in SBUF now
    tl = estimate([tr], "trn1").cores[0].timeline
    assert tl.start[tt.index] >= tl.end[bc[0].index]


def test_with_a_bank_to_spare_the_copy_stays_in_psum():
    """7 accumulators (14336 B) + the copy (2048 B) = 16384 B: it fits, the PE makes it."""
    tr = _run_full(7)
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert [(i.engine, i.writes[0].memory) for i in bc] == [("tensor", "psum")]
    assert tr.meta["psum_peak_bytes_per_partition"] == 16384


def test_the_kernels_own_psum_overflow_is_still_an_error():
    """9 accumulators (18432 B) overflow PSUM whatever happens to the copy."""
    with pytest.raises(CapacityError) as e:
        _run_full(9)
    assert e.value.rule == "psum-capacity"
