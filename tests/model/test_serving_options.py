"""Serving options on Trainium: KV-cache precision, framework figures, attention data parallelism."""
import pytest

from trnsim.errors import ConfigError
from trnsim.model import estimate_inference
from trnsim.model.memory import GIB


def test_fp8_kv_cache_on_trainium_halves_kv_memory_and_speeds_decode():
    kw = dict(tp=32, lnc=2, batch=16, input_len=4096, output_len=1024)
    base = estimate_inference("llama-3.1-70b", "trn2.48xlarge", **kw)
    bf = estimate_inference("llama-3.1-70b", "trn2.48xlarge", kv_dtype="bf16", **kw)
    f8 = estimate_inference("llama-3.1-70b", "trn2.48xlarge", kv_dtype="fp8", **kw)
    # 80 layers x (K + V) x 1 KV head per core (8 heads replicated over tp 32) x 128 x 16 x 5120 tokens
    hand = 80 * 2 * 1 * 128 * 16 * 5120 * 2 / GIB
    assert base.kv_cache_gib == pytest.approx(hand) and bf.kv_cache_gib == pytest.approx(hand)
    assert bf.tpot_ms == pytest.approx(base.tpot_ms)            # bf16 KV = the default, nothing moves
    assert f8.kv_cache_gib == pytest.approx(hand / 2) and f8.tpot_ms < bf.tpot_ms


def test_attention_dp_shards_the_mla_cache_on_trainium():
    kw = dict(tp=64, lnc=2, ep=64, batch=64, input_len=1024, output_len=1024, precision="fp8", kv_dtype="fp8",
              check_memory=False)
    dp = estimate_inference("deepseek-v3", "trn2.48xlarge", attention_dp=64, **kw)
    hand = 61 * (512 + 64) * 1 * 2048 * 1 / GIB                  # one sequence per core, fp8 latent
    assert dp.kv_cache_gib == pytest.approx(hand)
    assert dp.parallel["attention_dp"] == 64


def test_gpu_framework_refused_on_trainium_and_bad_layouts():
    with pytest.raises(ConfigError, match="does not serve on Trainium"):
        estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=4, lnc=2, framework="vllm")
    with pytest.raises(ConfigError, match="attention-dp=3 must divide tp=4"):
        estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=4, lnc=2, attention_dp=3)
    e = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=4, lnc=2, framework="nxdi")
    assert e.framework["key"] == "nxdi" and e.framework["kv_dtype"] == "bf16"
