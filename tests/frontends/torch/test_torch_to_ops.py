"""to_ops: a captured graph as trnsim Op records; FLOPs and bytes against hand formulas."""
import os

import pytest

pytest.importorskip("torch")

from trnsim.errors import UnsupportedError  # noqa: E402
from trnsim.frontends.torch import check_model, to_ops  # noqa: E402
from trnsim.frontends.torch.graph_ops import uncosted  # noqa: E402
from trnsim.model.ops import OP_KINDS, roofline_for  # noqa: E402

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")


def test_linear_flops_are_2mkn():
    r = check_model(os.path.join(MODELS, "linear_model.py:OneLinear"), "4x16x256", "float32")
    (op,) = to_ops(r)
    m, k, n = 4 * 16, 256, 512  # leading dims fold into m
    assert (op.kind, op.m, op.k, op.n, op.batch) == ("matmul", m, k, n, 1)
    assert op.flops == 2 * m * k * n
    assert op.name == "proj:linear" and op.dtype == "float32"
    assert op.bytes == 4 * (m * k + n * k + n + m * n)  # x, weight, bias read; y written; fp32
    (bf,) = to_ops(r, dtype="bfloat16")
    assert bf.dtype == "bfloat16" and bf.bytes == 2 * (m * k + n * k + n + m * n)


def test_causal_attention_flops_by_hand():
    B, H, L, D = 2, 8, 256, 64
    shape = f"{B}x{H}x{L}x{D}"
    r = check_model(os.path.join(MODELS, "linear_model.py:CausalAttention"), [shape] * 3, "bfloat16")
    (op,) = to_ops(r)
    assert (op.kind, op.q_len, op.kv_len, op.head_dim, op.heads, op.causal) == ("attention", L, L, D, B * H, True)
    # QK^T and PV: 2 * (2*L*L*D) per head, half of it under the causal mask
    assert op.flops == 2 * 2 * B * H * L * L * D / 2
    assert op.bytes == 4 * B * H * L * D * 2  # q, k, v read and out written, bf16


@pytest.mark.parametrize("capture", ["export", "dispatch"])
def test_tiny_gpt_matmul_flops_by_hand(capture):
    # the export graph has linear; the dispatch fallback sees t + addmm / mm: the same work either way
    T, d, V, layers = 128, 64, 1000, 2
    r = check_model(os.path.join(MODELS, "tiny_gpt.py:TinyGPT"), f"1x{T}", capture_with=capture)
    assert r.capture == {"export": "torch.export", "dispatch": "dispatch-trace"}[capture]
    ops = to_ops(r, dtype="bfloat16")
    per_layer = 2 * T * (d * 3 * d + d * d + d * 4 * d + 4 * d * d)
    assert sum(o.flops for o in ops if o.kind == "matmul") == layers * per_layer + 2 * T * d * V
    heads, hd = 4, 16
    assert sum(o.flops for o in ops if o.kind == "attention") == layers * 2 * 2 * heads * T * T * hd / 2
    kinds = [o.kind for o in ops]
    assert kinds.count("norm") == 5 and kinds.count("embedding") == 2 and kinds.count("matmul") == 9
    norm = next(o for o in ops if o.kind == "norm")
    assert (norm.rows, norm.cols) == (T, d)
    # the Op list is estimable like a zoo model's: every op a known kind, a positive roofline time
    cost = roofline_for("trn2")
    assert all(o.kind in OP_KINDS and cost.time(o).seconds > 0 for o in ops)


def test_uncostable_ops_skipped_or_strict_error():
    r = check_model(os.path.join(MODELS, "custom_op_model.py:CustomMLP"), "4x32", "float32")
    assert [o.qualname for o in uncosted(r)] == ["trnsim_test::fused_bias_gelu"]
    assert [o.kind for o in to_ops(r)] == ["matmul", "matmul"]
    with pytest.raises(UnsupportedError) as e:
        to_ops(r, strict=True)
    assert e.value.rule == "uncostable-op" and "custom_op_model.py" in e.value.where


def test_dispatch_level_graph_costs_the_same_matmuls():
    # the fallback sees t + addmm instead of linear: same m, k, n
    r = check_model(os.path.join(MODELS, "fallback_model.py:ObjectOutMLP"), "2x32", "float32")
    mms = [(o.m, o.k, o.n, o.flops) for o in to_ops(r) if o.kind == "matmul"]
    assert mms == [(2, 32, 64, 2 * 2 * 32 * 64), (2, 64, 8, 2 * 2 * 64 * 8)]
