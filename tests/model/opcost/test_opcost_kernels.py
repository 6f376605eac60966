"""The reference kernels compute the right numbers (small shapes, with numerics, against numpy),
and one real timing-only simulation respects the hand roofline."""
import ml_dtypes
import numpy as np
import pytest

from trnsim.errors import TrnsimError
from trnsim.kernels import spec, time_reference

RNG = np.random.default_rng(7)


def _run(name, shape, dtype, arrays):
    """Run kernel ``name`` with numerics, using the tiling its shape builder picks."""
    ks = spec(name)
    args, kw = ks.build(shape, np.dtype(dtype))
    assert [a.shape for a in args] == [a.shape for a in arrays]
    return ks.load()(*arrays, **kw)


# (16, 256, 4096) and (256, 256, 2048) hold lhsT across two column blocks (HOLD_A)
@pytest.mark.parametrize("m,k,n", [(256, 256, 1024), (16, 128, 128), (128, 384, 512), (16, 256, 4096),
                                   (256, 256, 2048)])
def test_matmul_bf16(m, k, n):
    a = RNG.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    got = _run("matmul", {"m": m, "k": k, "n": n}, ml_dtypes.bfloat16, (a, b)).astype(np.float32)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    # fp32 accumulation, one bf16 rounding of the result (8 bits of mantissa)
    np.testing.assert_allclose(got, ref, rtol=2 ** -7, atol=2 ** -7 * np.abs(ref).max())


def test_matmul_fp32_and_fp8():
    a = RNG.standard_normal((256, 128)).astype(np.float32)
    b = RNG.standard_normal((256, 512)).astype(np.float32)
    got = _run("matmul", {"m": 128, "k": 256, "n": 512}, np.float32, (a, b))
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-4, atol=1e-3)
    a8, b8 = a.astype(ml_dtypes.float8_e4m3), b.astype(ml_dtypes.float8_e4m3)
    got8 = _run("matmul", {"m": 128, "k": 256, "n": 512}, ml_dtypes.float8_e4m3, (a8, b8))
    ref8 = a8.astype(np.float32).T @ b8.astype(np.float32)
    np.testing.assert_allclose(got8, ref8, rtol=1e-4, atol=1e-3)


def _attention_ref(q, k, v, causal):
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:  # queries aligned at the end of the keys
        off = k.shape[0] - q.shape[0]
        s = np.where(np.tri(q.shape[0], k.shape[0], off, dtype=bool), s, -np.inf)
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)) @ v


@pytest.mark.parametrize("q_len,kv_len,d,causal", [(1024, 1024, 64, False), (1024, 1024, 64, True),
                                                   (256, 1024, 128, True), (1, 512, 64, False)])
def test_flash_attention(q_len, kv_len, d, causal):
    q = RNG.standard_normal((q_len, d)).astype(np.float32)
    k = RNG.standard_normal((kv_len, d)).astype(np.float32)
    v = RNG.standard_normal((kv_len, d)).astype(np.float32)
    shape = {"q_len": q_len, "kv_len": kv_len, "head_dim": d, "causal": int(causal)}
    got = _run("attention", shape, np.float32, (q.T.copy(), k.T.copy(), v))
    np.testing.assert_allclose(got, _attention_ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_norms_and_softmax():
    x = RNG.standard_normal((256, 1024)).astype(np.float32)
    g = RNG.standard_normal(1024).astype(np.float32)
    b = RNG.standard_normal(1024).astype(np.float32)
    shape = {"rows": 256, "cols": 1024}
    got = _run("rmsnorm", shape, np.float32, (x, g))
    np.testing.assert_allclose(got, x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * g,
                               rtol=1e-5, atol=1e-5)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    got = _run("layernorm", shape, np.float32, (x, g, b))
    np.testing.assert_allclose(got, (x - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-5, atol=1e-5)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(_run("softmax", shape, np.float32, (x,)), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-7)


def test_elementwise_family():
    x = RNG.standard_normal((128, 4096)).astype(np.float32)
    y = RNG.standard_normal((128, 4096)).astype(np.float32)
    shape = {"rows": 128, "cols": 4096}
    silu = x / (1 + np.exp(-x))
    np.testing.assert_array_equal(_run("add", shape, np.float32, (x, y)), x + y)
    np.testing.assert_array_equal(_run("mul", shape, np.float32, (x, y)), x * y)
    np.testing.assert_allclose(_run("silu", shape, np.float32, (x,)), silu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run("swiglu", shape, np.float32, (x, y)), silu * y, rtol=1e-5, atol=1e-6)


def test_adamw_step():
    p, g, m, v = (RNG.random((128, 2048)).astype(np.float32) for _ in range(4))
    P, M, V = _run("adamw", {"rows": 128, "cols": 2048}, np.float32, (p, g, m, v))
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    m1 = b1 * m + (1 - b1) * g
    v1 = b2 * v + (1 - b2) * g * g
    p1 = p * (1 - lr * wd) - lr * (m1 / (1 - b1)) / (np.sqrt(v1 / (1 - b2)) + eps)
    np.testing.assert_allclose(M, m1, rtol=1e-6)
    np.testing.assert_allclose(V, v1, rtol=1e-6)
    np.testing.assert_allclose(P, p1, rtol=1e-6, atol=1e-7)


def test_bad_reference_shapes_raise():
    with pytest.raises(TrnsimError) as e:
        time_reference("matmul", {"m": 200, "k": 128, "n": 128}, "bfloat16", "trn2")
    assert e.value.rule == "reference-shape" and e.value.value == 200
    with pytest.raises(TrnsimError):
        time_reference("conv", {}, "bfloat16", "trn2")
    with pytest.raises(TrnsimError):
        time_reference("attention", {"q_len": 128, "kv_len": 128, "head_dim": 256, "causal": 0},
                       "bfloat16", "trn2")


def test_simulated_matmul_is_not_faster_than_the_hand_roofline():
    from trnsim.hardware import load_catalog
    cat = load_catalog()
    chip = cat.chip_for("trn2")
    core = cat.cores[chip.core]
    m = k = n = 1024
    secs = time_reference("matmul", {"m": m, "k": k, "n": n}, "bfloat16", "trn2")
    # hand roofline: 128 x 128 PE array, 2 FLOP per MAC per cycle; HBM share = chip bandwidth / cores
    peak = 2 * 128 * 128 * core.clocks.tensor_hz
    assert core.tensor.max_contraction == 128 and core.tensor.max_stationary_free == 128
    compute_s = 2 * m * k * n / peak
    hbm_s = (m * k + k * n + m * n) * 2 / (chip.hbm_bandwidth_bytes_per_s / chip.cores)
    assert secs >= max(compute_s, hbm_s)
    assert secs < 5 * max(compute_s, hbm_s)   # a blocked kernel this size keeps the PE array fed


def test_simulated_costs_with_the_real_timer(tmp_path):
    from trnsim.model.ops import Op
    from trnsim.model.opcost import SimulatedOpCosts
    a = SimulatedOpCosts("trn1", cache_dir=str(tmp_path), timer=time_reference, lnc=1)
    op = Op(kind="norm", name="L0.rmsnorm", rows=128, cols=2048)
    got = a.time(op)
    assert got.how == "simulated" and a.timer_calls == 1
    assert got.seconds == pytest.approx(time_reference("rmsnorm", {"rows": 128, "cols": 2048},
                                                       "bfloat16", "trn1"))
    b = SimulatedOpCosts("trn1", cache_dir=str(tmp_path), timer=time_reference, lnc=1)
    assert b.time(op).seconds == got.seconds and b.timer_calls == 0


def _counts(shape):
    from collections import Counter
    from trnsim.kernels.timer import run_reference
    est = run_reference("attention", shape, "bfloat16", "trn2")
    return Counter((i.engine, i.opcode, i.free) for i in est.cores[0].trace.instructions)


@pytest.mark.parametrize("causal", [0, 1])
def test_flash_attention_skips_key_tiles_past_the_diagonal(causal):
    # q = kv = 1024: 8 query groups of 128 rows, 512-wide key tiles.  By hand: causal, group g's last
    # row is 128 g + 127, so groups 0-3 see key tile 0 only and groups 4-7 tiles 0 and 1:
    # 4 x 1 + 4 x 2 = 12 (group, key tile) pairs; not causal 8 x 2 = 16.  Each pair is one 512-wide
    # QK matmul, one 512-wide exp and ONE DMA transpose of the whole exp tile.  P V runs per 128-key
    # chunk starting at or before the last row: causal 1 + 2 + ... + 8 = 36 chunks, else 8 x 8 = 64.
    # The tiles that cross the diagonal (tile 0 of groups 0-3, tile 1 of groups 4-7) are masked.
    c = _counts({"q_len": 1024, "kv_len": 1024, "head_dim": 128, "causal": causal})
    pairs = 12 if causal else 16
    assert c[("tensor", "nc_matmul", 512)] == pairs
    assert c[("scalar", "activation_reduce", 512)] == pairs
    assert c[("dma", "dma_transpose", 512)] == pairs
    assert c[("tensor", "nc_matmul", 128)] == (36 if causal else 64)
    masked = sum(n for (eng, op, f), n in c.items() if op == "affine_select")
    assert masked == (8 if causal else 0)
    # no P transposes on the PE array (the library transposes P by DMA)
    assert not any(op == "nc_transpose" for (eng, op, f) in c)


def test_flash_attention_sections_match_numpy():
    # above the section threshold the keys go in sections with a flash rescale between them: a
    # 512-key section over 1536 keys (3 sections) must give the one-pass softmax, blocked or not
    q = RNG.standard_normal((384, 64)).astype(np.float32)
    k = RNG.standard_normal((1536, 64)).astype(np.float32)
    v = RNG.standard_normal((1536, 64)).astype(np.float32)
    for causal in (False, True):
        for blocks in (dict(), dict(LT=1024, QLOAD=2)):  # unblocked; 2 key tiles per P V, Q 2 groups a load
            got = spec("attention").load()(q.T.copy(), k.T.copy(), v, causal=causal, TQ=128, TK=512, SEC=512,
                                            SECTION_THRESHOLD=1024, **blocks)
            np.testing.assert_allclose(got, _attention_ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target,causal", [("trn1", True), ("trn1", False), ("trn3", True)])
def test_flash_attention_on_other_generations(target, causal):
    # trn1 transposes P on the PE array (its DMA transposes are much slower), trn3 by DMA like trn2
    from trnsim.options import Options
    q = RNG.standard_normal((256, 128)).astype(np.float32)
    k = RNG.standard_normal((1024, 128)).astype(np.float32)
    v = RNG.standard_normal((1024, 128)).astype(np.float32)
    shape = {"q_len": 256, "kv_len": 1024, "head_dim": 128, "causal": int(causal)}
    args, kw = spec("attention").build(shape, np.dtype(np.float32))
    res = spec("attention").load().run(q.T.copy(), k.T.copy(), v, options=Options(target=target), **kw)
    np.testing.assert_allclose(res.outputs, _attention_ref(q, k, v, causal), rtol=1e-4, atol=1e-5)
    ops = {i.opcode for i in res.traces[0].instructions}  # a PE transpose is traced as a matmul
    assert ("dma_transpose" in ops) == (target != "trn1")


def test_gqa_is_one_call_per_query_head_over_the_shared_kv():
    # GQA (4 query heads over one KV head): nki-library attention_cte also runs one batch item per
    # query head, loading its KV head's K/V each time, so the op costs 4 calls of one head
    from trnsim.model.opcost.select import kernel_call
    from trnsim.model.ops import Op
    call = kernel_call(Op(kind="attention", name="a", q_len=256, kv_len=256, head_dim=64, heads=4,
                          causal=True))
    assert call.repeats == 4 and call.shape["q_len"] == 256
    q = RNG.standard_normal((4, 256, 64)).astype(np.float32)
    k = RNG.standard_normal((256, 64)).astype(np.float32)
    v = RNG.standard_normal((256, 64)).astype(np.float32)
    for h in range(4):
        got = _run("attention", call.shape, np.float32, (q[h].T.copy(), k.T.copy(), v))
        s = q[h] @ k.T / 8.0  # sqrt(64)
        s = np.where(np.tri(256, dtype=bool), s, -np.inf)
        p = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(got, (p / p.sum(1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)
