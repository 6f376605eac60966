"""Partition-dim operand broadcasts cost an instruction (issue 13, section 1: "broadcast operands").

``t.broadcast_to((128, F))`` of a [1, F] tile, read by a Vector/Scalar/GpSimd instruction, is
executed as ``nc_matmul(ones[1, 128], t, is_stationary_onezero=True)`` into PSUM [ARCH2], one
matmul per 512 fp32 columns, or by a DMA where PSUM cannot serve it; numerics never change.
"""
import numpy as np
import pytest

from trnsim.errors import HardwareFileError, TrnsimError
from trnsim.hardware import get_core
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


def policy_file(tmp_path, policy):
    """A hardware file setting every core's partition-broadcast lowering."""
    p = tmp_path / f"broadcast_{policy}.toml"
    p.write_text("".join(f'[cores.{c}.broadcast]\npartition = {{ value = "{policy}", source = "test" }}\n'
                         for c in ("v2", "v3", "v4")))
    return str(p)


def _kernel(free, engine=None):
    """out = x * row.broadcast_to((128, free)) with one tensor_tensor."""
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, row):
        out = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.shared_hbm)
        xt = nl.load(x)
        r = nl.load(row)
        kw = {} if engine is None else {"engine": engine}
        y = nisa.tensor_tensor(xt, r.broadcast_to((128, free)), op=nl.multiply, **kw)
        nl.store(out, y)
        return out

    return k


def _run(free, dtype=np.float32, target="trn1", hw=None, engine=None, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((128, free)).astype(dtype)
    row = rng.standard_normal((1, free)).astype(dtype)
    opts = Options(target=target, **({"hardware_file": hw} if hw else {}))
    run = _kernel(free, engine).run(x, row, options=opts)
    out = run.outputs[0] if isinstance(run.outputs, tuple) else run.outputs
    return x, row, np.asarray(out), run.traces[0]


def _ops(tr):
    return [(i.engine, i.opcode) for i in tr]


def test_trace_has_one_ones_row_matmul_per_512_columns():
    x, row, out, tr = _run(1024)
    ins = list(tr)
    bc = [i for i in ins if i.opcode == "partition_broadcast"]
    # hand count: 1024 fp32 columns / 512 per PSUM bank = 2 matmuls, K = 1, N = 512, M = 128
    assert [(i.engine, i.partitions, i.free) for i in bc] == [("tensor", 1, 512)] * 2
    assert [i.attr("stationary_free") for i in bc] == [128, 128]
    assert all(i.attr("onezero") for i in bc)
    # each reads its 512 columns (2048 B) of the one source partition, writes [128, 512] fp32 PSUM
    assert [(r.memory, r.partitions, r.start, r.stop) for i in bc for r in i.reads] == \
        [("sbuf", 1, 0, 2048), ("sbuf", 1, 2048, 4096)]
    assert [(w.memory, w.partitions, w.start, w.stop, w.dtype) for i in bc for w in i.writes] == \
        [("psum", 128, 0, 2048, "float32"), ("psum", 128, 2048, 4096, "float32")]
    tt = [i for i in ins if i.opcode == "tensor_tensor"][0]
    assert tt.index > bc[-1].index and bc[0].index == bc[1].index - 1
    copy = tt.reads[1]
    assert (copy.memory, copy.tensor, copy.partitions, copy.stop) == \
        ("psum", bc[0].writes[0].tensor, 128, 4096)
    # the inserted instruction carries the user's source line (the consumer's)
    assert bc[0].source == tt.source
    np.testing.assert_array_equal(out, x * row)


def test_tensor_busy_is_the_hand_computed_matmul_cycles_and_the_consumer_waits():
    _, _, _, tr = _run(1024)
    t = get_core("v2")
    # cores.toml [v2.timing.tensor]: max(N, mm_init) cycles per pass; fp32 takes fp32_passes,
    # halved for a 0/1 stationary (is_stationary_onezero); the 32-cycle stationary load (128 x
    # 0.25) hides behind it; trn1 has no warm-up throttle
    tt = t.timing.tensor
    cycles = max(512, tt.mm_init_cycles) * tt.fp32_passes / tt.onezero_speedup   # 1024
    assert cycles == 1024 and 128 * tt.ls_cycles_per_column < cycles
    est = estimate([tr], "trn1")
    tl = est.cores[0].timeline
    assert tl.engine_busy_ns()["tensor"] == pytest.approx(2 * cycles / t.clocks.tensor_hz * 1e9)
    ins = list(tr)
    last_bc = max(i.index for i in ins if i.opcode == "partition_broadcast")
    consumer = [i.index for i in ins if i.opcode == "tensor_tensor"][0]
    assert tl.start[consumer] >= tl.end[last_bc] > 0


def test_bf16_source_is_one_pass_per_matmul():
    import ml_dtypes
    _, _, _, tr = _run(512, dtype=ml_dtypes.bfloat16)
    t = get_core("v2")
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert len(bc) == 1 and bc[0].dtype_in == "bfloat16"
    tl = estimate([tr], "trn1").cores[0].timeline
    assert tl.engine_busy_ns()["tensor"] == pytest.approx(512 / t.clocks.tensor_hz * 1e9)


def test_free_policy_gives_the_old_trace_and_numerics_are_identical(tmp_path):
    x, row, out_t, tr_t = _run(1024)
    _, _, out_f, tr_f = _run(1024, hw=policy_file(tmp_path, "free"))
    _, _, out_d, tr_d = _run(1024, hw=policy_file(tmp_path, "dma"))
    assert "partition_broadcast" not in {i.opcode for i in tr_f}
    assert _ops(tr_f) == [op for op in _ops(tr_t) if op[1] != "partition_broadcast"]
    # free: the consumer reads the source row itself (one SBUF partition, stride 0)
    tt = [i for i in tr_f if i.opcode == "tensor_tensor"][0]
    assert (tt.reads[1].memory, tt.reads[1].partitions) == ("sbuf", 1)
    assert estimate([tr_f], "trn1").cores[0].timeline.engine_busy_ns()["tensor"] == 0
    for o in (out_t, out_f, out_d):
        assert o.tobytes() == (x * row).tobytes()


def test_dma_policy_copies_the_row_into_sbuf(tmp_path):
    _, _, _, tr = _run(1024, hw=policy_file(tmp_path, "dma"))
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert len(bc) == 1 and bc[0].engine == "dma"
    w = bc[0].writes[0]
    assert (w.memory, w.partitions, w.stop, w.elements, w.dtype) == \
        ("sbuf", 128, 1024 * 4, 128 * 1024, "float32")
    tt = [i for i in tr if i.opcode == "tensor_tensor"][0]
    assert tt.reads[1].tensor == w.tensor and tt.reads[1].memory == "sbuf"
    tl = estimate([tr], "trn1").cores[0].timeline
    assert tl.start[tt.index] >= tl.end[bc[0].index]


def test_broadcast_wider_than_psum_falls_back_to_dma():
    # 8192 fp32 columns = 32 KiB per partition > the 16 KiB PSUM partition (and > the 4096
    # elements one Vector access may read from PSUM): a DMA copy into SBUF instead
    x, row, out, tr = _run(8192)
    bc = [i for i in tr if i.opcode == "partition_broadcast"]
    assert [i.engine for i in bc] == ["dma"]
    assert bc[0].writes[0].stop == 8192 * 4
    np.testing.assert_array_equal(out, x * row)
    # 4096 columns still fit: 4096 / 512 = 8 matmuls
    _, _, _, tr = _run(4096)
    assert [i.engine for i in tr if i.opcode == "partition_broadcast"] == ["tensor"] * 8


def test_gpsimd_consumer_and_integer_rows_take_the_dma():
    # GpSimd cannot read PSUM; the PE takes no int32
    _, _, _, tr = _run(512, engine="gpsimd")
    assert [i.engine for i in tr if i.opcode == "partition_broadcast"] == ["dma"]
    x, row, out, tr = _run(512, dtype=np.int32)
    assert [i.engine for i in tr if i.opcode == "partition_broadcast"] == ["dma"]
    np.testing.assert_array_equal(out, x * row)


def test_free_dim_broadcast_costs_nothing():
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, col):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        c = nl.load(col)
        y = nisa.tensor_tensor(nl.load(x), c.broadcast_to((128, 512)), op=nl.add)
        nl.store(out, y)
        return out

    x = np.ones((128, 512), np.float32)
    tr = k.run(x, np.ones((128, 1), np.float32), options=Options(target="trn1")).traces[0]
    assert "partition_broadcast" not in {i.opcode for i in tr}


def test_unknown_policy_in_a_hardware_file_is_refused(tmp_path):
    with pytest.raises(HardwareFileError) as e:
        load_catalog(policy_file(tmp_path, "shuffle"))
    assert isinstance(e.value, TrnsimError)
    assert e.value.rule == "hardware-file-range" and e.value.value == "shuffle"
    assert {c.broadcast.partition for c in load_catalog(None).cores.values()} == {"tensor"}


def test_fast_forwarded_loop_keeps_the_broadcasts():
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(x, rows):
        out = nl.ndarray((8, 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(8):
            r = nl.load(rows[i])
            y = nisa.tensor_tensor(nl.load(x[i]), r.broadcast_to((128, 512)), op=nl.multiply)
            nl.store(out[i], y)
        return out

    x = np.ones((8, 128, 512), np.float32)
    rows = np.ones((8, 1, 512), np.float32)
    got = {}
    for ff in ("auto", "off"):
        tr = k.run(x, rows, options=Options(target="trn2", timing_only=True,
                                            fast_forward=ff)).traces[0]
        got[ff] = (bool(tr.instructions.blocks),
                   sum(1 for i in tr if i.opcode == "partition_broadcast"), len(tr),
                   estimate([tr], "trn2").latency_ns)
    # 8 iterations x (2 loads, 1 broadcast matmul, tensor_tensor, store); iterations 3..6 are
    # synthesized under "auto" and the timing is the same as tracing them all
    assert got["auto"][:3] == (True, 8, 8 * 5) and got["off"][:3] == (False, 8, 8 * 5)
    assert got["auto"][3] == pytest.approx(got["off"][3])


def test_nl_add_broadcasting_a_row_over_partitions_is_lowered_too(tmp_path):
    # the SDK's add_broadcast_par_dim example: [128, 512] + [1, 512] with numpy broadcasting
    nki, nisa, nl = _legacy()

    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((1, 512)).astype(np.float32)
    got = {}
    for pol in ("tensor", "free"):
        run = k.run(a, b, options=Options(target="trn1", hardware_file=policy_file(tmp_path, pol)))
        got[pol] = (np.asarray(run.outputs[0] if isinstance(run.outputs, tuple) else run.outputs),
                    list(run.traces[0]))
    out, ins = got["tensor"]
    bc = [i for i in ins if i.opcode == "partition_broadcast"]
    assert [(i.engine, i.partitions, i.free) for i in bc] == [("tensor", 1, 512)]
    add = [i for i in ins if i.opcode == "tensor_tensor"][0]
    assert add.reads[1].tensor == bc[0].writes[0].tensor and add.reads[1].partitions == 128
    assert out.tobytes() == got["free"][0].tobytes() == (a + b).tobytes()
    assert [i.opcode for i in got["free"][1]] == [i.opcode for i in ins if i not in bc]
    assert got["free"][1][2].reads[1].partitions == 1


def test_a_lowered_operand_resolved_again_is_not_broadcast_twice():
    from trnsim.nki.core.broadcast_lowering import is_partition_broadcast, lower
    from trnsim.nki.core.context import KernelContext, running
    from trnsim.nki.core.conventions import PRESETS
    from trnsim.nki.ops.base import new_tile
    ctx = KernelContext(options=Options(target="trn1"), conventions=PRESETS["legacy"])
    with running(ctx):
        row = new_tile(ctx, (1, 512), np.dtype(np.float32), "sbuf")
        view = row.broadcast_to((128, 512))
        assert is_partition_broadcast(view, "vector") and not is_partition_broadcast(view, "tensor")
        once = lower(ctx, view, "vector")
        assert not is_partition_broadcast(once, "vector")
        assert [i.opcode for i in ctx.trace] == ["partition_broadcast"]


def test_new_api_broadcast_to_is_lowered_the_same_way():
    import trnsim
    import trnsim.compat
    trnsim.compat.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def k(x, row):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        xt = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x)
        nisa.dma_copy(dst=r, src=row)
        y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=xt, data2=nl.broadcast_to(r, (128, 512)), op=nl.multiply)
        nisa.dma_copy(dst=out, src=y)
        return out

    x = np.full((128, 512), 2.0, np.float32)
    row = np.arange(512, dtype=np.float32).reshape(1, 512)
    tr = trnsim.trace(k, x, row)
    assert [(i.engine, i.opcode) for i in tr] == [
        ("dma", "dma_copy"), ("dma", "dma_copy"), ("tensor", "partition_broadcast"),
        ("vector", "tensor_tensor"), ("dma", "dma_copy")]
