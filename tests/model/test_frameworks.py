"""Serving frameworks as data: figures, KV-cache formats and their defaults."""
import pytest

from trnsim.errors import ConfigError
from trnsim.model.frameworks import framework_names, kv_bytes, load_framework, resolve_kv

HOPPER = ("bf16", "fp8")
BLACKWELL = ("bf16", "fp8", "fp4")


def test_every_framework_loads_with_sane_figures():
    names = framework_names()
    assert {"trtllm", "vllm", "sglang", "nxdi"} <= set(names)
    for n in names:
        fw = load_framework(n)
        assert 0 < fw.kv_fraction <= 1 and fw.max_batch >= 1 and fw.memory_rule in ("free", "total")


def test_documented_memory_fractions():
    assert load_framework("vllm").kv_fraction == 0.9          # gpu_memory_utilization default
    assert load_framework("trtllm").memory_rule == "free"     # kv_cache_free_gpu_mem_fraction


def test_kv_default_follows_the_framework():
    trt, vllm = load_framework("trtllm"), load_framework("vllm")
    assert resolve_kv(trt, None, "fp8", HOPPER) == "fp8"      # --quantization FP8 sets an FP8 KV cache
    assert resolve_kv(trt, None, "bf16", HOPPER) == "bf16"
    assert resolve_kv(vllm, None, "fp8", HOPPER) == "bf16"    # kv_cache_dtype auto = model dtype
    assert resolve_kv(vllm, "fp8_e5m2", "bf16", HOPPER) == "fp8"


def test_kv_format_refused_where_framework_or_hardware_lacks_it():
    with pytest.raises(ConfigError, match="no fp4 KV cache"):
        resolve_kv(load_framework("vllm"), "fp4", "fp4", BLACKWELL)
    with pytest.raises(ConfigError, match="hardware has no fp4"):
        resolve_kv(load_framework("trtllm"), "fp4", "fp8", HOPPER)
    assert resolve_kv(load_framework("trtllm"), "fp4", "fp4", BLACKWELL) == "fp4"


def test_kv_bytes_and_overrides():
    assert kv_bytes("bf16") == 2.0 and kv_bytes("fp8") == 1.0
    assert kv_bytes("fp4") == pytest.approx(0.5 + 1.0 / 16)   # 4 bits + one 8-bit scale per 16 values
    assert load_framework("vllm", {"vllm.kv_fraction": 0.95}).kv_fraction == 0.95
    with pytest.raises(ConfigError, match="unknown serving framework"):
        load_framework("tgi")
    with pytest.raises(ConfigError, match="kv_fraction"):
        load_framework("vllm", {"kv_fraction": 1.5})
