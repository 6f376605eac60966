"""Op graph FLOPs against hand formulas, and 6 N tokens as a cross-check of dense training."""
import pytest

from trnsim.model import count_params, load_model
from trnsim.model.transformer import Layout, inference_graph, layer_forward, training_graph
from trnsim.model.graph import OpGraph, GraphOp


def _fwd(cfg, lay, b, s):
    return OpGraph(tuple(GraphOp(op, 1.0, "forward") for op in layer_forward(cfg, False, b, s, s, lay)))


def test_llama_layer_forward_flops_by_hand():
    cfg = load_model("llama-2-7b")
    b, s, h, inter = 2, 1024, 4096, 11008
    g = _fwd(cfg, Layout(), b, s)
    T = b * s
    assert g.flops(kind="matmul") == pytest.approx(2 * T * (4 * h * h + 3 * h * inter))
    # causal flash attention: QK^T and PV, 2 FLOPs per MAC, half the square
    assert g.flops(kind="attention") == pytest.approx(2 * b * 32 * s * s * (128 + 128) * 0.5)


def test_tp_divides_per_core_matmul_flops():
    cfg = load_model("llama-3-70b")
    one = _fwd(cfg, Layout(tp=1), 1, 2048).flops(kind="matmul")
    eight = _fwd(cfg, Layout(tp=8), 1, 2048).flops(kind="matmul")
    assert eight == pytest.approx(one / 8)


def test_gqa_qkv_width():
    cfg = load_model("llama-3-8b")                      # 32 heads, 8 KV heads of 128
    qkv = [op for op in layer_forward(cfg, False, 1, 16, 16, Layout(tp=4)) if op.name == "attn.qkv"][0]
    assert (qkv.k, qkv.n) == (4096, (32 // 4 + 2 * 8 // 4) * 128)


@pytest.mark.parametrize("name", ["llama-2-7b", "gpt3-6.7b", "mistral-7b"])
def test_training_matmul_flops_match_6_n_tokens(name):
    cfg = load_model(name)
    seq, mb, tp = 2048, 1, 4
    g = training_graph(cfg, Layout(tp=tp), mb, seq, "none")
    mm = sum(x.count * x.op.flops for x in g.ops if x.op.kind == "matmul") * tp
    pc = count_params(cfg)
    # N: weights that do matmul work = all but embeddings and norms; an LM head tied to the embedding still runs
    n = pc.total - pc.embedding - cfg.layers * 2 * cfg.hidden * (2 if cfg.norm == "layernorm" else 1)
    n += cfg.vocab * cfg.hidden if cfg.tied_embeddings else 0
    assert mm == pytest.approx(6 * n * seq * mb, rel=0.01)


def test_full_recompute_adds_one_forward():
    cfg = load_model("llama-2-7b")
    g = training_graph(cfg, Layout(), 1, 1024, "full")
    assert g.flops(phase="recompute") == pytest.approx(g.flops(phase="forward"))
    sel = training_graph(cfg, Layout(), 1, 1024, "selective")
    assert sel.flops(phase="recompute") == pytest.approx(sel.flops(phase="forward", kind="attention"))


def test_moe_layer_runs_top_k_experts_per_token():
    cfg = load_model("mixtral-8x7b")
    T = 4096
    ops = layer_forward(cfg, True, 1, T, T, Layout())
    expert_flops = sum(op.flops for op in ops if op.name.startswith("moe.experts") and op.kind == "matmul")
    assert expert_flops == pytest.approx(2 * T * cfg.top_k * 3 * cfg.hidden * cfg.moe_intermediate)


def test_decode_graph_reads_every_weight_once():
    cfg = load_model("llama-2-7b")
    g = inference_graph(cfg, Layout(), 1, 1, 512, decode=True)
    w = sum(x.count * x.op.k * x.op.n for x in g.ops if x.op.kind == "matmul")
    pc = count_params(cfg)
    assert w == pc.total - pc.embedding - cfg.layers * 2 * cfg.hidden - cfg.hidden


def test_context_parallel_splits_attention_work():
    cfg = load_model("llama-3-8b")
    full = _fwd(cfg, Layout(), 1, 8192).flops(kind="attention")
    cp4 = [op for op in layer_forward(cfg, False, 1, 8192 // 4, 8192, Layout(cp=4)) if op.kind == "attention"][0]
    assert cp4.flops == pytest.approx(full / 4)


def test_captured_op_list_is_timed_forward_and_backward():
    from trnsim.model import estimate_ops
    from trnsim.model.ops import Op
    ops = [Op(kind="matmul", name="fc", m=2048, k=4096, n=4096, flops=2 * 2048 * 4096 * 4096,
              bytes=(2048 * 4096 * 2 + 4096 * 4096 * 2 + 2048 * 4096 * 2)),
           Op(kind="elementwise", name="gelu", rows=2048, cols=4096, flops=8 * 2048 * 4096, bytes=2 * 2048 * 4096 * 2)]
    no_gap = dict(compute=1.0, memory=1.0, vector=1.0, comm=1.0)
    e = estimate_ops(ops, "trn1.32xlarge", efficiency=no_gap)
    t = estimate_ops(ops, "trn1.32xlarge", training=True, efficiency=no_gap)
    peak = 128 * 128 * 2 * 2.8e9
    assert e.by_kind["matmul"] == pytest.approx(ops[0].flops / peak)
    assert t.by_kind["matmul"] == pytest.approx(3 * ops[0].flops / peak)     # forward + dgrad + wgrad
    assert t.by_kind["elementwise"] == pytest.approx(3 * e.by_kind["elementwise"])
    assert t.flops == pytest.approx(3 * ops[0].flops + 3 * ops[1].flops)
