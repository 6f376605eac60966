"""A tutorial-style GPT training script runs unchanged under `trnsim exec --instance`: real losses,
per-step estimates, a summary, report and trace; its FLOPs match a hand count and its step time the
model-level estimator."""
import json
import os
import re
import sys

import pytest

from conftest import SCRIPTS

GPT = os.path.join(SCRIPTS, "tiny_gpt_train.py")


def test_gpt_runs_unchanged_and_prints_estimates(run_exec, tmp_path):
    html, trace = tmp_path / "run.html", tmp_path / "run.json"
    p, s = run_exec([sys.executable, GPT], extra=("--report", str(html), "--trace", str(trace)),
                    env={"GPT_STEPS": "4", "GPT_DIM": "64"})
    assert p.returncode == 0, p.stderr[-3000:]
    first, last = map(float, re.search(r"first ([\d.]+) last ([\d.]+)", p.stdout).groups())
    assert last < first                                    # real training on the CPU
    for k in range(1, 5):                                  # one estimate line per mark_step
        assert re.search(rf"\[trnsim\] step +{k} +est [\d.]+ (us|ms) on trn1.32xlarge", p.stderr)
    assert "estimated Trainium training step on trn1.32xlarge" in p.stderr
    assert s["steps"] == 4 and s["world"] == 1
    # the first graph also holds the model's initialization; every later step reuses one graph
    assert s["graphs_distinct"] == 2 and not s["recompiles_every_step"]
    assert s["tokens_per_step"] == 8 * 64                  # batch x sequence, read from the embedding
    assert s["tokens_per_s"] == pytest.approx(512 / s["steady_step_s"])
    assert 0 < s["mfu"] < 1
    assert s["unlowered_ops"] == {}
    page = html.read_text()
    assert "<svg" in page and "Operators of the steady step" in page and "aten::mm" in page
    assert "whole trn1.32xlarge: 32 ranks, data parallel (projected)" in page and "pure data parallelism" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")   # self-contained
    tr = json.loads(trace.read_text())
    slices = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert {"mm", "addmm", "xla::fused_adamw"} <= {e["name"] for e in slices}
    assert sum(e["dur"] for e in slices) == pytest.approx(s["steady_step_s"] * 1e6, rel=1e-3)
    assert any(e["ph"] == "C" and e["name"] == "TensorE utilization %" for e in tr["traceEvents"])
    assert all("line" in e["args"] for e in slices)


@pytest.fixture
def in_process(monkeypatch, tmp_path):
    """Run the GPT script's main() in this process under the shim, recording on trn1.32xlarge."""
    from trnsim.compat import install_torch_xla
    from trnsim.frontends.torch_xla import session
    monkeypatch.setenv("TRNSIM_XLA_INSTANCE", "trn1.32xlarge")
    monkeypatch.setenv("TRNSIM_XLA_QUIET", "1")
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(tmp_path))
    monkeypatch.setenv("GPT_STEPS", "2")
    saved = {k: v for k, v in sys.modules.items() if k.startswith("torch_xla")}
    install_torch_xla()
    monkeypatch.syspath_prepend(SCRIPTS)
    sys.modules.pop("tiny_gpt_train", None)
    try:
        import tiny_gpt_train as g
        g.main()
        yield g, session.current()
    finally:
        session.close()
        for k in [k for k in sys.modules if k.startswith("torch_xla")]:
            del sys.modules[k]
        sys.modules.update(saved)
        sys.modules.pop("tiny_gpt_train", None)


def test_flops_match_a_hand_count(in_process):
    g, s = in_process
    from trnsim.frontends.torch_xla.summary import steady_graph
    est = steady_graph(s).est
    D, V, T, B, H, L = g.DIM, g.VOCAB, g.SEQ, g.BATCH, g.HEADS, g.LAYERS
    matmul_params = L * 12 * D * D + D * V          # qkv 3D^2, proj D^2, mlp 8D^2 per layer; the LM head
    tokens = B * T
    attn_fwd = L * 2 * B * H * T * T * (2 * D // H) * 0.5   # QK^T and PV, causal half
    hand = 6 * matmul_params * tokens + attn_fwd * (1 + 2.5)  # fwd + bwd (2x matmul, 2.5x flash attention)
    assert est.flops == pytest.approx(hand, rel=0.02)


def test_step_time_matches_the_model_level_estimator(in_process):
    """The recorded forward ops, given to the model layer's estimate_ops (which adds its own backward rule),
    land within 10 % of the recorded forward + backward; the step adds the model layer's fused AdamW."""
    g, s = in_process
    from trnsim.frontends.torch.graph_ops import to_ops
    from trnsim.frontends.torch_xla.graphs import captured
    from trnsim.frontends.torch_xla.summary import steady_graph
    from trnsim.model import estimate_ops
    from trnsim.model.context import make_context
    from trnsim.model.transformer import optimizer_graph
    graph = steady_graph(s)
    est = graph.est
    fwd = [captured(c) for c in graph.calls if c.phase == "forward"]
    # XLA fuses dtype casts into their consumer: the model layer's graph has none either
    ops = [o for o in to_ops(fwd) if not o.name.endswith("_to_copy")]
    model = estimate_ops(ops, instance="trn1.32xlarge", training=True)
    recorded = est.by_phase["forward"] + est.by_phase["backward"]
    assert recorded == pytest.approx(model.total_s, rel=0.10)
    params = sum(p.numel() for p in g.GPT().parameters())
    ctx = make_context("llama-3-8b", "trn1.32xlarge")
    opt = optimizer_graph(params, 34.0).time(ctx.costing.seconds)  # 34 B/param: estimator.toml's AdamW
    assert est.step_s == pytest.approx(model.total_s + opt, rel=0.10)


def test_item_between_steps_is_not_a_step(run_exec):
    """A `loss.item()` read between two cuts runs nothing on the device: 4 training steps stay 4 steps,
    and the steady step is the training graph (a positive time and MFU), not an empty graph."""
    p, s = run_exec([sys.executable, GPT], env={"GPT_STEPS": "4", "GPT_DIM": "64", "GPT_MARK_AFTER_ITEM": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert s["steps"] == 4 and s["graphs_distinct"] == 2
    assert s["steady_step_s"] > 0 and 0 < s["mfu"] < 1
    assert all(g["ops"] > 1 for g in s["graphs"])
