"""The decode attention kernel and the attention implementations of the op-cost mapping: numerics
against numpy, HBM bytes and call counts by hand, the unfused path as the sum of its kernels."""
import numpy as np
import pytest

from trnsim.errors import TrnsimError
from trnsim.kernels import run_reference, spec
from trnsim.model.opcost import SimulatedOpCosts
from trnsim.model.opcost.select import attention_calls, kernel_calls
from trnsim.model.ops import Op

RNG = np.random.default_rng(11)


def _ref(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[1])
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)) @ v


@pytest.mark.parametrize("heads,rows,kv,d", [(2, 10, 4096, 64), (1, 1, 512, 128), (3, 128, 256, 32),
                                                  (1, 100, 1920, 64)])
def test_decode_kernel_matches_numpy(heads, rows, kv, d):
    # rows = the query rows of one KV group; 4096 keys = two 2048-key chunks; heads = independent passes
    q = RNG.standard_normal((heads, rows, d)).astype(np.float32)
    k = (3 * RNG.standard_normal((heads, kv, d))).astype(np.float32)  # peaked rows: the max shift matters
    v = RNG.standard_normal((heads, kv, d)).astype(np.float32)
    ks = spec("attention_decode")
    _, kw = ks.build({"heads": heads, "rows": rows, "kv_len": kv, "head_dim": d}, np.dtype(np.float32))
    got = ks.load()(q.transpose(0, 2, 1).copy(), k.transpose(0, 2, 1).copy(), v, **kw)
    for h in range(heads):
        np.testing.assert_allclose(got[h], _ref(q[h], k[h], v[h]), rtol=1e-4, atol=1e-5)


def test_decode_kernel_reads_k_and_v_once_per_kv_head():
    # HBM bytes of one pass = K + V (kv x d x 2 bytes each) + Q and the output (rows x d x 2 each):
    # the group's query rows share one read of the cache
    kv, d = 512, 128
    for heads, rows in ((1, 1), (1, 16), (3, 16)):
        est = run_reference("attention_decode", {"heads": heads, "rows": rows, "kv_len": kv, "head_dim": d},
                            "bfloat16", "trn2")
        assert est.cores[0].timeline.hbm_bytes == heads * (2 * kv * d * 2 + 2 * rows * d * 2)


def _decode_op(batch=64, heads=80, kv_heads=8, q_len=1):
    return Op(kind="attention", name="dec", q_len=q_len, kv_len=4096, head_dim=128, heads=heads * batch,
              kv_heads=kv_heads * batch)


def _shape(op, lnc=1):
    (call,) = attention_calls(op, lnc=lnc)
    assert call.repeats == 1
    return call.kernel, call.shape


def test_decode_maps_to_one_pass_per_sequence_and_kv_head():
    # 64 sequences x 8 KV heads = 512 passes over a KV head's cache, 256 per physical core at LNC=2,
    # each with the group's 80 / 8 = 10 query rows (was: 2560 calls, one per query head)
    assert _shape(_decode_op(), 2) == ("attention_decode",
                                       {"heads": 256, "rows": 10, "kv_len": 4096, "head_dim": 128})
    # speculative verify, 4 new tokens: 40 rows; a 64-head group x 4 tokens = 256 rows splits in two
    shape = _shape(_decode_op(q_len=4))[1]
    assert (shape["heads"], shape["rows"]) == (512, 40)
    shape = _shape(_decode_op(batch=1, heads=64, kv_heads=1, q_len=4))[1]
    assert (shape["heads"], shape["rows"]) == (2, 128)
    # one KV head on two cores: the cores split its cache
    shape = _shape(_decode_op(batch=1, heads=8, kv_heads=1), 2)[1]
    assert (shape["heads"], shape["kv_len"]) == (1, 2048)
    # no kv_heads given: multi-head attention, one KV head per query head
    shape = _shape(Op(kind="attention", name="mha", q_len=1, kv_len=512, head_dim=64, heads=8))[1]
    assert (shape["heads"], shape["rows"]) == (8, 1)
    # 14 padded heads over 3 KV heads on a TP rank: each KV head costed with the largest group, 5
    shape = _shape(Op(kind="attention", name="pad", q_len=1, kv_len=512, head_dim=64, heads=14, kv_heads=3))[1]
    assert (shape["heads"], shape["rows"]) == (3, 5)
    # a 100,000-key cache is four passes of 25,088 keys (SBUF holds at most 32,768 keys of K and V)
    shape = _shape(Op(kind="attention", name="long", q_len=1, kv_len=100_000, head_dim=128, heads=8, kv_heads=1))[1]
    assert (shape["heads"], shape["rows"], shape["kv_len"]) == (4, 8, 25088)
    # above the decode limit (8 new tokens) the prefill kernel runs per query head
    (call,) = attention_calls(_decode_op(batch=1, q_len=128), lnc=2)
    assert (call.kernel, call.repeats) == ("attention", 40)


def test_unfused_calls_by_hand():
    op = Op(kind="attention", name="p", q_len=256, kv_len=512, head_dim=128, heads=8, kv_heads=2, causal=True)
    calls = [(c.kernel, c.shape, c.dtype, c.repeats) for c in kernel_calls(op, 1, attention_impl="unfused")]
    # per KV head: [4 heads x 256 rows, 128] x [128, 512]; mask add and softmax over 8 x 256 score rows;
    # [1024, 512] x [512, 128]; fp32 as torch's math path computes
    # (the matmuls batched: one kernel over the 2 KV heads)
    assert calls == [("bmm", {"m": 1024, "k": 128, "n": 512, "batch": 2}, "float32", 1),
                     ("add", {"rows": 2048, "cols": 512}, "float32", 1),
                     ("softmax", {"rows": 2048, "cols": 512}, "float32", 1),
                     ("bmm", {"m": 1024, "k": 512, "n": 128, "batch": 2}, "float32", 1)]
    per_head = kernel_calls(op, 1, "unfused", {"unfused": {"gqa": "per_head", "dtype": "bfloat16"}})
    assert (per_head[0].shape["m"], per_head[0].shape["batch"], per_head[0].dtype) == (256, 8, "bfloat16")
    # LNC=2 splits the batch over the two cores
    assert kernel_calls(op, 2, attention_impl="unfused")[0].shape["batch"] == 1


class Timer:
    """t = 1e-9 x (product of the shape's values)."""

    def __call__(self, kernel, shape, dtype, target, hardware_file=None):
        return 1e-9 * float(np.prod(list(shape.values())))


def test_unfused_time_is_the_sum_of_its_parts(tmp_path):
    op = Op(kind="attention", name="u", q_len=1, kv_len=512, head_dim=128, heads=8, kv_heads=2)
    # grids holding exactly the parts' shapes, so each part is a grid hit
    grids = {"bmm": {"dtypes": ["float32"], "axes": [{"name": "batch", "values": [2]}, {"name": "m", "values": [4]},
                                                     {"name": "k", "values": [128, 512]},
                                                     {"name": "n", "values": [128, 512]}]},
             "softmax": {"dtypes": ["float32"], "axes": [{"name": "rows", "values": [8]},
                                                         {"name": "cols", "values": [512]}]}}
    costs = SimulatedOpCosts("trn2", cache_dir=str(tmp_path), timer=Timer(), lnc=1, grids=grids,
                             attention_impl="unfused")
    got = costs.time(op)
    # batched QK^T (2 KV heads x [4,128]x[128,512]) + softmax [8, 512] + batched PV (2 x [4,512]x[512,128])
    want = 2 * 1e-9 * 4 * 128 * 512 + 1e-9 * 8 * 512 + 2 * 1e-9 * 4 * 512 * 128
    assert got.how == "simulated" and got.seconds == pytest.approx(want)


def test_bad_attention_settings_raise():
    op = _decode_op()
    with pytest.raises(TrnsimError, match="attention implementation"):
        attention_calls(op, impl="flash3")
    with pytest.raises(TrnsimError, match="attention implementation"):
        SimulatedOpCosts("trn2", attention_impl="eager")
    with pytest.raises(TrnsimError, match="reference matmul"):
        kernel_calls(op, 1, "unfused", {"unfused": {"dtype": "mxfp4"}})


def test_transformer_decode_attention_carries_its_kv_heads():
    # llama-3-8b: 32 query / 8 KV heads; TP=8 leaves 4 and 1 per rank; 16 sequences decoding one token:
    # 16 passes over one KV head's cache each, 4 query rows per pass (8 per core at LNC=2)
    from trnsim.model import load_model
    from trnsim.model.transformer import Layout, layer_forward
    ops = layer_forward(load_model("llama-3-8b"), False, 16, 1, 1024, Layout(tp=8), decode=True)
    (att,) = [op for op in ops if op.kind == "attention"]
    assert (att.heads, att.kv_heads) == (16 * 4, 16 * 1)
    assert _shape(att, 2) == ("attention_decode", {"heads": 8, "rows": 4, "kv_len": 1024, "head_dim": 128})


@pytest.mark.parametrize("m,k,n,dt", [(10, 4096, 128, np.float32), (256, 1024, 1536, "bfloat16")])
def test_matmul_partition_major_k_blocks_match_numpy(m, k, n, dt):
    # narrow weight rows (128 fp32 = 512 B, 512 bf16 = 1 KiB per partition): K blocks load partition-major,
    # the second shape also holding lhsT; the unfused attention's P V is the first shape
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dt == "bfloat16" else dt
    ks = spec("matmul")
    _, kw = ks.build({"m": m, "k": k, "n": n}, np.dtype(dt))
    assert kw.get("KP") == (2 if m < 128 else 1)
    a = RNG.standard_normal((k, m)).astype(dt)
    b = RNG.standard_normal((k, n)).astype(dt)
    got = ks.load()(a, b, **kw).astype(np.float32)
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    tol = 1e-5 if dt == np.float32 else 2 ** -7
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
