"""GPU serving: phase-aware op costs, KV-cache precision, serving layouts, framework memory rules."""
import pytest

from trnsim.errors import ConfigError
from trnsim.model.config import load_model
from trnsim.model import estimate_inference as infer
from trnsim.model.gpu.serving_costs import gemm_efficiency, load_serving_factors
from trnsim.model.memory import GIB

H100_BW = 3.35e12   # bytes/s, NVIDIA H100 SXM datasheet


def test_gemm_efficiency_saturates_with_rows():
    assert gemm_efficiency(0.8, 128, 128) == pytest.approx(0.4)
    assert gemm_efficiency(0.8, 1 << 20, 128) == pytest.approx(0.8, rel=1e-3)
    assert gemm_efficiency(0.8, 0, 128) == pytest.approx(0.8 / 129)


def test_serving_factors_per_gpu_and_overrides():
    h100, b200 = load_serving_factors("h100-sxm"), load_serving_factors("b200")
    assert h100.factors["gemm_bf16"] == pytest.approx(808.34 / 989.4, abs=2e-3)   # P250
    assert b200.factors["hbm"] != h100.factors["hbm"]
    assert load_serving_factors("h100-sxm", overrides={"hbm": 0.5}).factors["hbm"] == 0.5
    with pytest.raises(ConfigError):
        load_serving_factors("h100-sxm", overrides={"nonsense": 1})


def test_h100_llama3_70b_tp8_decode_batch1_within_goal_band():
    e = infer("llama-3-70b", "p5.48xlarge", tp=8, batch=1, input_len=2048, output_len=256)
    cfg = load_model("llama-3-70b")
    from trnsim.model.params import count_params
    floor_ms = count_params(cfg).total * 2 / 8 / H100_BW * 1e3       # bf16 weights streamed once per step
    assert 5.0 < floor_ms < 5.5
    b = e.breakdown
    # the bf16 weights stream at the serving HBM factor (0.85 of peak on H100)
    assert floor_ms < b["decode_weights_ms"] < floor_ms / 0.85 * 1.1
    on_gpu = b["decode_weights_ms"] + b["decode_kv_ms"] + b["decode_compute_ms"] + b["decode_overhead_ms"]
    assert on_gpu + b["decode_comm_ms"] == pytest.approx(e.tpot_ms)
    assert floor_ms < e.tpot_ms < 12.0


def test_fp8_kv_cache_halves_kv_memory():
    kw = dict(tp=8, batch=32, input_len=4096, output_len=1024, precision="fp8")
    bf = infer("llama-3.1-70b", "p5.48xlarge", kv_dtype="bf16", **kw)
    f8 = infer("llama-3.1-70b", "p5.48xlarge", kv_dtype="fp8", **kw)
    # 80 layers x (K + V) x 1 KV head per GPU (8 heads / tp 8) x 128 x tokens x bytes
    hand = 80 * 2 * 1 * 128 * 32 * 5120 * 2 / GIB
    assert bf.kv_cache_gib == pytest.approx(hand)
    assert f8.kv_cache_gib == pytest.approx(hand / 2)
    assert f8.tpot_ms < bf.tpot_ms                       # attention reads half the bytes
    assert f8.framework["kv_dtype"] == "fp8" and "KV cache" in f8.notes[0]


def test_trtllm_defaults_to_fp8_kv_for_fp8_weights_and_says_so():
    e = infer("llama-3.1-8b", "p5.48xlarge", precision="fp8")
    assert e.framework["kv_dtype"] == "fp8" and "default" in e.notes[0]
    assert infer("llama-3.1-8b", "p5.48xlarge", precision="fp8", framework="vllm").framework["kv_dtype"] == "bf16"


def test_deepseek_on_8_gpus_fits_as_deployed():
    kw = dict(tp=8, batch=64, input_len=1024, output_len=1024, precision="fp8")
    dp = infer("deepseek-v3", "p5en.48xlarge", attention_dp=8, ep=8, **kw)
    copied = infer("deepseek-v3", "p5en.48xlarge", check_memory=False, **kw)
    # MLA latent (512) + RoPE key (64) per token and layer, fp8, 8 sequences per GPU under attention DP
    hand = 61 * (512 + 64) * 8 * 2048 * 1 / GIB
    assert dp.kv_cache_gib == pytest.approx(hand)
    assert copied.kv_cache_gib == pytest.approx(hand * 8)     # without attention DP every rank holds all 64
    assert dp.memory["total_gib"] < 141e9 / GIB


def test_refusal_names_gpus_and_suggests_fp8_kv():
    with pytest.raises(ConfigError) as e:
        infer("llama-3.1-70b", "p5.48xlarge", tp=1, batch=64, input_len=4096, output_len=512, framework="vllm")
    msg = str(e.value)
    assert "per GPU" in msg and "NeuronCore" not in msg and "--kv-dtype fp8" in msg


def test_vllm_budget_is_its_memory_utilization():
    e = infer("llama-3.1-8b", "p5.48xlarge", framework="vllm")
    assert e.memory["hbm_per_core_gib"] == pytest.approx(0.9 * 80e9 / GIB, rel=1e-3)


def test_chunked_prefill_bounds_the_working_set():
    small = infer("llama-3.1-8b", "p5.48xlarge", batch=8, input_len=8192, output_len=16, precision="fp8")
    large = infer("llama-3.1-8b", "p5.48xlarge", batch=32, input_len=8192, output_len=16, precision="fp8")
    # prefill runs one 8192-token budget at a time: only the logits rows grow with the batch
    logits = (32 - 8) * 128256 * 4 / GIB
    assert large.memory["activations_gib"] - small.memory["activations_gib"] == pytest.approx(logits, abs=2e-4)   # to_dict rounds to 1e-4 GiB


def test_orderings():
    kw = dict(batch=64, input_len=1024, output_len=256)
    h100 = infer("llama-3.1-70b", "p5.48xlarge", tp=4, precision="fp8", **kw)
    h200 = infer("llama-3.1-70b", "p5en.48xlarge", tp=4, precision="fp8", **kw)
    b200 = infer("llama-3.1-70b", "p6-b200.48xlarge", tp=4, precision="fp8", **kw)
    assert h100.tpot_ms > h200.tpot_ms > b200.tpot_ms
    bf16 = infer("llama-3.1-70b", "p5.48xlarge", tp=4, **kw)
    assert bf16.tpot_ms > h100.tpot_ms and bf16.ttft_ms > h100.ttft_ms
    t2 = infer("llama-3.1-70b", "p5.48xlarge", tp=2, precision="fp8", **kw)
    assert t2.tpot_ms > h100.tpot_ms
    b1 = infer("llama-3.1-70b", "p5.48xlarge", tp=4, precision="fp8", batch=1, input_len=1024, output_len=256)
    assert b1.tpot_ms < h100.tpot_ms and b1.output_tokens_per_s < h100.output_tokens_per_s
    long = infer("llama-3.1-70b", "p5.48xlarge", tp=4, precision="fp8", batch=64, input_len=8192, output_len=256)
    assert long.ttft_ms > h100.ttft_ms and long.tpot_ms > h100.tpot_ms


def test_replicas_must_fit_the_system():
    e = infer("llama-2-70b", "p5.48xlarge", tp=2, replicas=4, precision="fp8", batch=8)
    one = infer("llama-2-70b", "p5.48xlarge", tp=2, precision="fp8", batch=8)
    assert e.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s) and e.cores == 8
    with pytest.raises(ConfigError, match="exceeds the 8 GPUs"):
        infer("llama-2-70b", "p5.48xlarge", tp=4, replicas=4, precision="fp8")


def test_layout_refusals_name_gpus():
    from trnsim.model import estimate_training
    with pytest.raises(ConfigError) as e:
        estimate_training("llama-3.1-8b", "p5.48xlarge", tp=3)
    assert "8 GPUs" in str(e.value) and "NeuronCore" not in str(e.value)
