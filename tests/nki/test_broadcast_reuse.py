"""Two consumers of one partition-broadcast view: under ``partition_reuse = "resident"`` (the
default, cores.toml) the second reads the first copy while its source is unchanged; under
``none`` each consumer makes its own copy.  Numerics never change."""
import numpy as np
import pytest

from trnsim.errors import HardwareFileError
from trnsim.hardware.catalog import load_catalog
from trnsim.options import Options
from trnsim.timing import estimate


def _legacy():
    import trnsim.compat
    trnsim.compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    return nki, nisa, nl


def reuse_file(tmp_path, value):
    p = tmp_path / f"reuse_{value}.toml"
    p.write_text("".join(f'[cores.{c}.broadcast]\npartition_reuse = {{ value = "{value}", '
                         f'source = "test" }}\n' for c in ("v2", "v3", "v4")))
    return str(p)


def _opts(tmp_path, value, **kw):
    return Options(target="trn1", hardware_file=reuse_file(tmp_path, value), **kw)


def _two_consumers(rewrite=False):
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, row, row2):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        xt = nl.load(x)
        r = nl.load(row)
        b = r.broadcast_to((128, 512))
        y1 = nisa.tensor_tensor(xt, b, op=nl.multiply)
        if rewrite:
            r[...] = nl.load(row2)     # the source changes: the first copy is stale
        y2 = nisa.tensor_tensor(y1, r.broadcast_to((128, 512)), op=nl.add)
        nl.store(out, y2)
        return out

    return k


def _run(kernel, tmp_path, value, **kw):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    row = rng.standard_normal((1, 512)).astype(np.float32)
    row2 = rng.standard_normal((1, 512)).astype(np.float32)
    run = kernel.run(x, row, row2, options=_opts(tmp_path, value, **kw))
    out = run.outputs[0] if isinstance(run.outputs, tuple) else run.outputs
    return (x, row, row2), np.asarray(out), run.traces[0]


def test_second_consumer_reads_the_first_copy(tmp_path):
    (x, row, _), out, tr = _run(_two_consumers(), tmp_path, "resident")
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    tts = [i for i in tr if i.opcode == "tensor_tensor"]
    assert [(i.engine, i.free) for i in bc] == [("tensor", 512)]   # one K=1 matmul, 512 columns
    copy = bc[0].writes[0].tensor
    assert [t.reads[1].tensor for t in tts] == [copy, copy]
    # one copy of 2048 B per partition, live from its matmul to the second consumer
    live = np.asarray(tr.meta["psum_live"]).reshape(-1, 3).tolist()
    assert live == [[bc[0].index, tts[1].index, 2048]]
    assert out.tobytes() == (x * row + row).tobytes()


def test_none_gives_each_consumer_its_own_copy(tmp_path):
    (x, row, _), out, tr = _run(_two_consumers(), tmp_path, "none")
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    tts = [i for i in tr if i.opcode == "tensor_tensor"]
    assert len(bc) == 2 and bc[0].writes[0].tensor != bc[1].writes[0].tensor
    assert [t.reads[1].tensor for t in tts] == [b.writes[0].tensor for b in bc]
    assert out.tobytes() == (x * row + row).tobytes()
    # the second matmul is Tensor-engine time the shared copy saves: 512 cycles x fp32 passes /
    # the 0/1 stationary speed-up each (cores.toml [v2.timing.tensor]), twice as much busy
    busy = {v: estimate([_run(_two_consumers(), tmp_path, v)[2]], "trn1")
            .cores[0].timeline.engine_busy_ns()["tensor"] for v in ("resident", "none")}
    assert busy["none"] == pytest.approx(2 * busy["resident"]) and busy["resident"] > 0


def test_a_rewritten_source_gets_a_new_copy(tmp_path):
    (x, row, row2), out, tr = _run(_two_consumers(rewrite=True), tmp_path, "resident")
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert len(bc) == 2
    load2 = next(i for i in tr if i.engine == "dma" and i.index > bc[0].index)
    assert bc[1].index > load2.index and bc[1].writes[0].tensor != bc[0].writes[0].tensor
    np.testing.assert_array_equal(out, x * row + row2)


def test_a_loop_invariant_row_is_broadcast_once_and_fast_forward_agrees(tmp_path):
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, rows):
        out = nl.ndarray((8, 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        r = nl.load(rows)
        for i in nl.affine_range(8):
            y = nisa.tensor_tensor(nl.load(x[i]), r.broadcast_to((128, 512)), op=nl.multiply)
            nl.store(out[i], y)
        return out

    x = np.ones((8, 128, 512), np.float32)
    rows = np.ones((1, 512), np.float32)
    got = {}
    for value in ("resident", "none"):
        for ff in ("auto", "off"):
            tr = k.run(x, rows, options=_opts(tmp_path, value, timing_only=True,
                                              fast_forward=ff)).traces[0]
            est = estimate([tr], "trn1")
            got[value, ff] = (sum(1 for i in tr if i.opcode == "partition_broadcast"), len(tr),
                              est.latency_ns, est.cores[0].timeline.engine_busy_ns()["tensor"])
    # 1 load + 8 x (load, tensor_tensor, store) + the broadcasts: 1 shared, or 1 per iteration
    assert got["resident", "off"][:2] == (1, 1 + 8 * 3 + 1)
    assert got["none", "off"][:2] == (8, 1 + 8 * 4)
    for value in ("resident", "none"):
        assert got[value, "auto"][:2] == got[value, "off"][:2]
        assert got[value, "auto"][2] == pytest.approx(got[value, "off"][2])
    # one broadcast matmul instead of eight: an eighth of the Tensor time; the latency never grows (on
    # trn1 this kernel is bound by its loads, so the saving need not show in the latency)
    assert got["none", "off"][3] == pytest.approx(8 * got["resident", "off"][3])
    assert got["resident", "off"][2] <= got["none", "off"][2]


def test_unknown_reuse_value_is_refused(tmp_path):
    with pytest.raises(HardwareFileError) as e:
        load_catalog(reuse_file(tmp_path, "always"))
    assert e.value.rule == "hardware-file-range" and e.value.value == "always"
    assert {c.broadcast.partition_reuse for c in load_catalog(None).cores.values()} == \
        {"resident"}
