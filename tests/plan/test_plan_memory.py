"""The planner rejects layouts that do not fit, with the reason and a hand-checked memory figure: first
by the weights + gradients + optimizer states alone (no activation model needed), then by the full
per-core memory including activations."""
import pytest

from trnsim.plan import plan

GIB = float(1 << 30)
# llama-3.1-8b as published (HF config.json): hidden, layers, heads, KV heads, head dim, MLP, vocab
H, L, NH, NKV, HD, FF, V = 4096, 32, 32, 8, 128, 14336, 128256
STATE_BYTES = 2 + 4 + 4 + 8     # bf16 weight, fp32 gradient, fp32 master weight, two fp32 Adam moments
RESERVED = GIB                   # runtime reserve per core (model/data/estimator.toml)
TRN1_CORE_HBM = 16.0             # trn1: 32 GiB HBM shared by 2 NeuronCores


def _params_per_core(tp: int) -> float:
    """Parameters of one core with tp-way tensor parallelism and a single pipeline stage."""
    attn = H * NH * HD + 2 * H * NKV * HD + NH * HD * H      # q, k, v, o (no bias)
    layer = attn / tp + 2 * H + 3 * H * FF / tp               # RMSNorms are replicated, SwiGLU split
    return L * layer + (2 * V * H + H) / tp                   # embedding, untied LM head + final norm


def _activations(tp: int, tokens: int) -> float:
    """Activation bytes kept for the backward pass with no recompute (flash attention), plus fp32 logits."""
    kv = max(1.0, NKV / tp)     # KV heads are replicated once tp exceeds them
    layer = (4 * tokens * H * 2 + tokens * (NH / tp + 2 * kv) * HD * 2      # norm/matmul inputs, Q/K/V
             + tokens * NH / tp * HD * 2 + tokens * NH / tp * 4            # attention output, fp32 LSE
             + tokens * 3 * FF / tp * 2)                                   # SwiGLU intermediates
    return L * layer + tokens * V / tp * 4


def test_a_layout_whose_states_alone_do_not_fit_is_dropped_with_the_reason():
    r = plan("llama-3.1-8b", "trn1.32xlarge", count=1, seq=2048, global_batch=32, workers=1,
             space=dict(tp_max=8, pp_max=4, cp=[1], micro_batch=[1], recompute=["full"], zero=[0], sp=[False]))
    rows = {(x.config.tp, x.config.pp): x for x in r.rows}
    bad = rows[(1, 1)]
    assert bad.status == "memory-fit"
    need = (_params_per_core(1) * STATE_BYTES + RESERVED) / GIB       # 135.6 GiB
    assert bad.memory_gib == pytest.approx(need, rel=1e-9)
    assert bad.hbm_gib == TRN1_CORE_HBM
    assert f"need {need:.1f} GiB" in bad.reason and "has 16.0 GiB" in bad.reason
    # the drop table counts exactly the rows over the core's HBM, and nothing ranked is over it
    assert r.drop_counts()["memory-fit"] == len([x for x in r.rows if x.memory_gib > TRN1_CORE_HBM]) > 0
    assert all(b.memory_per_core_gib <= TRN1_CORE_HBM for b in r.best)


def test_a_layout_whose_activations_do_not_fit_is_dropped_with_the_full_figure():
    r = plan("llama-3.1-8b", "trn1.32xlarge", count=1, seq=2048, global_batch=32, workers=1,
             space=dict(tp_max=16, pp_max=1, cp=[1], micro_batch=[1, 4], recompute=["none"], zero=[0], sp=[False]))
    bad = {(x.config.tp, x.config.micro_batch): x for x in r.rows}[(16, 4)]
    states = _params_per_core(16) * STATE_BYTES + RESERVED             # 9.4 GiB: fits on its own
    need = (states + _activations(16, tokens=4 * 2048)) / GIB          # 19.4 GiB with the activations
    assert states / GIB < TRN1_CORE_HBM < need
    assert bad.status == "memory-fit"
    assert bad.memory_gib == pytest.approx(need, rel=1e-9)
    assert f"needs {need:.1f} GiB per rank" in bad.reason
