"""LoRA fine-tuning, framework memory layouts, uneven pipeline stages and fixed step costs, checked by hand."""
import pytest

from trnsim.model import estimate_training, load_model
from trnsim.model.train_frameworks import FrameworkError, get_framework
from trnsim.model.lora import LoraError, adapter_params_total, make_lora
from trnsim.model.memory import MemoryFitError, params_per_core, training_memory
from trnsim.model.parallel import Parallel
from trnsim.model.transformer import Layout, layer_counts, training_graph


def test_lora_trainable_params_match_peft_count():
    # Llama-3-8B, r=16 on q,k,v,o: per layer q 16*(4096+4096), k and v 16*(4096+1024), o 16*(4096+4096)
    cfg = load_model("llama-3.1-8b")
    per_layer = 16 * (4096 + 4096) * 2 + 16 * (4096 + 1024) * 2
    assert adapter_params_total(cfg, make_lora(16, "q,k,v,o")) == 32 * per_layer == 13_631_488
    # all seven projections: + gate, up (4096 -> 14336) and down (14336 -> 4096)
    mlp = 3 * 16 * (4096 + 14336)
    assert adapter_params_total(cfg, make_lora(16, "q,k,v,o,gate,up,down")) == 32 * (per_layer + mlp)


@pytest.mark.parametrize("rank,targets", [(0, "q"), (-4, None), (8, "q,x"), (8, "")])
def test_bad_lora_settings_name_the_rule(rank, targets):
    with pytest.raises(LoraError) as e:
        make_lora(rank, targets)
    assert e.value.rule == "lora" and e.value.limit is not None


def test_frozen_base_has_dgrad_only_and_adapters_train():
    cfg = load_model("llama-3.1-8b")
    lay = Layout(tp=1)
    full = training_graph(cfg, lay, 1, 1024, "none")
    lora = training_graph(cfg, lay, 1, 1024, "none", make_lora(8, "q"))
    fwd_mm_full = full.flops("forward", "matmul")
    # full training: backward matmul FLOPs = 2 x forward (dgrad + wgrad); frozen base: 1 x, plus the adapters' 2 x
    assert full.flops("backward", "matmul") == pytest.approx(2 * fwd_mm_full)
    adapter_fwd = 32 * (2 * 1024 * 4096 * 8 + 2 * 1024 * 8 * 4096)        # x A then (x A) B, 32 layers
    assert lora.flops("forward", "matmul") == pytest.approx(fwd_mm_full + adapter_fwd)
    assert lora.flops("backward", "matmul") == pytest.approx(fwd_mm_full + 2 * adapter_fwd)
    assert not list(lora.select("head", "embedding"))[1:]                 # a frozen embedding has no backward


def test_lora_memory_drops_base_gradients_optimizer_and_frozen_inputs():
    cfg = load_model("llama-3.1-8b")
    par = Parallel(tp=4, dp=1)
    lora = make_lora(16, "q,k,v,o")
    full = training_memory(cfg, par, 1, 2048, "selective", 24 * 2**30)
    ft = training_memory(cfg, par, 1, 2048, "selective", 24 * 2**30, lora=lora)
    # adapters per TP rank: column-parallel q,k,v split B; row-parallel o splits A
    per_layer = 16 * 4096 + 16 * 4096 / 4 + 2 * (16 * 4096 + 16 * 1024 / 4) + 16 * 4096 / 4 + 16 * 4096
    adapters = 32 * per_layer
    assert ft.gradients == pytest.approx(adapters * 4)                    # fp32 gradients of the adapters only
    assert ft.optimizer == pytest.approx(adapters * (4 + 8))              # fp32 master + two moments
    # frozen layers without an adapter keep no input: the MLP's input and the down projection's (q,k,v,o
    # adapters still need the attention block's input); 32 layers, tp=4 without SP, bf16
    dropped = 32 * (2048 * 4096 * 2 + 2048 * 14336 / 4 * 2)
    assert ft.activations == pytest.approx(full.activations - dropped)
    assert ft.weights == pytest.approx(full.weights + adapters * 2)


def test_megatron_distributed_optimizer_shards_over_dp_times_cp():
    cfg = load_model("llama-3.1-70b")
    fw = get_framework("megatron")
    par = Parallel(tp=4, pp=4, cp=2, dp=4, vp=5, sp=True, zero=1)
    m = training_memory(cfg, par, 1, 8192, "selective", 80 * 2**30, framework=fw)
    p = params_per_core(cfg, par)
    assert m.weights == pytest.approx(2 * p)
    assert m.gradients == pytest.approx(2 * p + 4 * p / 8)               # bf16 buffer + fp32 main-grad shard
    assert m.optimizer == pytest.approx(12 * p / 8)                      # dp x cp = 8 ranks share the states
    assert m.reserved == fw.reserve_bytes


def test_zero_stages_shard_gradients_then_weights():
    cfg = load_model("llama-3.1-8b")
    fw = get_framework("fsdp")
    p = params_per_core(cfg, Parallel(dp=8))
    mem = {z: training_memory(cfg, Parallel(dp=8, zero=z), 1, 4096, "full", 80 * 2**30, framework=fw)
           for z in (1, 2, 3)}
    assert mem[1].gradients == pytest.approx(4 * p) and mem[2].gradients == pytest.approx(4 * p / 8)
    assert mem[1].optimizer == mem[3].optimizer == pytest.approx(12 * p / 8)
    one_layer = (p - 0) / 32
    assert mem[3].weights == pytest.approx(2 * p / 8 + 2 * 2 * one_layer)  # shard + two gathered layers


def test_uneven_pipeline_stages():
    cfg = load_model("llama-3.1-405b")                                    # 126 layers
    assert layer_counts(cfg, 8, 8) == (16.0, 0.0)                        # ceil(126 / 64) = 2 per chunk, 8 chunks
    assert layer_counts(cfg, 2, 1) == (63.0, 0.0)
    ds = load_model("deepseek-v3")                                       # 61 layers, 58 MoE
    dense, moe = layer_counts(ds, 16, 1)
    assert dense + moe == 4 and moe == 4


def test_trainium_defaults_are_named_and_switchable():
    e = estimate_training("llama-2-7b", "trn1.32xlarge", tp=8, seq=4096, global_batch=32)
    assert e.parallel["zero"] == 1 and e.parallel["sp"] and e.recompute == "selective"
    note = next(n for n in e.notes if n.startswith("NeuronX Distributed"))
    assert "ZeRO-1 (default; --zero)" in note and "sequence parallel (default" in note
    off = estimate_training("llama-2-7b", "trn1.32xlarge", tp=8, seq=4096, global_batch=32, zero=0, sp=False,
                            recompute="none", check_memory=False)
    assert off.parallel["zero"] == 0 and not off.parallel["sp"] and off.recompute == "none"
    assert "dp.all-reduce" in off.comm and "dp.reduce-scatter" in e.comm


def test_fixed_step_cost_in_breakdown_and_overridable():
    kw = dict(tp=8, seq=2048, global_batch=32)
    base = estimate_training("llama-2-7b", "trn1.32xlarge", **kw)
    more = estimate_training("llama-2-7b", "trn1.32xlarge", overrides={"nxd.fixed_step_s.trn1": 0.5}, **kw)
    assert more.breakdown["fixed_step"] == 0.5
    assert more.step_time_s == pytest.approx(base.step_time_s + 0.5 - base.breakdown["fixed_step"])


def test_refusal_names_the_framework_setting():
    with pytest.raises(MemoryFitError) as e:
        estimate_training("llama-2-7b", "trn1.32xlarge", tp=8, seq=4096, global_batch=32, zero=0, sp=False,
                          recompute="none")
    # 7B on tp=8 x dp=4: fp32 master + moments unsharded = 12 B x 0.84 B params per core do not fit 16 GiB
    assert "try --zero 1" in str(e.value)


def test_unknown_framework():
    with pytest.raises(FrameworkError):
        get_framework("caffe")


def test_cli_lora_flags(capsys):
    import json

    from trnsim.cli.main import main
    argv = ["estimate", "train", "--model", "llama-3.1-8b", "--instance", "trn2.3xlarge", "--tp", "4", "--seq", "2048",
            "--global-batch", "8", "--framework", "optimum-neuron", "--lora-rank", "16", "--lora-targets", "q,v",
            "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["parallel"]["lora"] == {"rank": 16, "targets": ["q", "v"]}
    assert d["parallel"]["framework"] == "optimum-neuron"
    assert d["breakdown"]["fixed_step"] > 0
    # q (4096 -> 4096) and v (4096 -> 1024), r=16: per TP rank A replicated, B split over 4
    adapters = 32 * (16 * 4096 + 16 * 4096 / 4 + 16 * 4096 + 16 * 1024 / 4)
    assert d["memory"]["gradients_gib"] == pytest.approx(adapters * 4 / 2**30, abs=1e-4)
    assert main(argv[:-1] + ["--zero", "5", "--json"]) != 0


def test_training_rows_come_from_the_calibration_set():
    import csv
    import os

    from trnsim.model.datafiles import load
    shared = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "calibration")
    if not os.path.isdir(shared):
        pytest.skip("no ../shared/calibration in this checkout")
    ids = set()
    for name in ("found-2026-11.csv", "gpus.csv", "models.csv"):
        with open(os.path.join(shared, name), newline="") as f:
            ids |= {r["id"] for r in csv.DictReader(f)}
    assert set(load("training_rows")) <= ids


def test_experts_over_tensor_parallel_ranks_when_ep_exceeds_dp():
    from trnsim.model.memory import expert_params_per_core
    from trnsim.model.parallel import expert_groups
    from trnsim.model.params import dense_mlp_params
    cfg = load_model("deepseek-v3")
    # Megatron's DeepSeek-V3 layout on 1024 GPUs: tp 2, pp 16, dp 32, ep 64 (expert tensor parallel 1)
    par = Parallel(tp=2, pp=16, dp=32, ep=64)
    assert par.etp == 1 and Parallel(tp=2, pp=16, dp=64, ep=64).etp == 2
    heavy_moe = 4                                                        # ceil(61 / 16) layers, all MoE
    assert expert_params_per_core(cfg, par) == pytest.approx(
        heavy_moe * 256 / 64 * dense_mlp_params(cfg, cfg.moe_intermediate))   # 4 whole experts per layer
    ep, same = expert_groups(par)
    # both TP ranks of 32 data-parallel groups, which sit tp x cp x pp = 32 ranks apart
    assert len(ep) == 64 and len(set(ep)) == 64 and ep[:4] == [0, 1, 32, 33]
    assert len(same) == 1                                                # 32 x 2 / 64: no other copy
    e = estimate_training("deepseek-v3", "p5.48xlarge", nodes=128, tp=2, pp=16, ep=64, seq=4096,
                          global_batch=8192)
    assert e.parallel["ep"] == 64 and "ep.all-to-all" in e.comm
