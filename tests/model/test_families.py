"""Hugging Face config.json of the serving-era families (llama4, gpt_oss, afmoe, qwen3_5) mapped key by key,
layer patterns counted by hand, and the families trnsim cannot model refused by name."""
import pytest

from trnsim.model.config import ModelConfigError
from trnsim.model.hf import from_hf_config
from trnsim.model.params import count_params

LLAMA4 = {"model_type": "llama4", "text_config": {
    "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 202048, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
    "attention_chunk_size": 8192, "rope_theta": 500000.0}}


def test_llama4_interleaved_moe_and_chunked_layers():
    cfg = from_hf_config(LLAMA4, "maverick")
    kinds = cfg.layer_kinds()
    assert cfg.moe_layers == 24 and kinds[0][0] is False and kinds[1][0] is True   # every second layer
    assert sum(1 for k in kinds if k[1] == "full") == 12                           # every fourth: global
    assert all(k[2] == 8192 for k in kinds if k[1] == "window")
    # by hand: 24 dense layers (MLP 16384) and 24 MoE layers (128 + 1 shared experts of 8192)
    h, L = 5120, 48
    attn = h * (40 * 128 + 2 * 8 * 128) + 40 * 128 * h
    dense = attn + 2 * h + 3 * h * 16384
    moe = attn + 2 * h + 129 * 3 * h * 8192 + h * 128
    emb = 202048 * h
    assert count_params(cfg).total == emb + emb + h + 24 * dense + 24 * moe


def test_gpt_oss_sliding_layers_and_mxfp4_experts():
    d = {"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64,
         "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088, "intermediate_size": 2880,
         "num_local_experts": 128, "num_experts_per_tok": 4, "sliding_window": 128,
         "layer_types": ["sliding_attention", "full_attention"] * 18, "quantization_config": {"quant_method": "mxfp4"}}
    cfg = from_hf_config(d, "gpt-oss")
    kinds = cfg.layer_kinds()
    assert [k[1] for k in kinds[:4]] == ["window", "full", "window", "full"] and kinds[0][2] == 128
    assert cfg.expert_format == "mxfp4" and cfg.attention_sinks and cfg.moe_layers == 36


def test_qwen3_5_hybrid_linear_attention():
    d = {"model_type": "qwen3_5", "text_config": {
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4,
        "head_dim": 256, "intermediate_size": 12288, "vocab_size": 248320, "full_attention_interval": 4,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}}
    cfg = from_hf_config(d, "q35")
    kinds = cfg.layer_kinds()
    assert sum(1 for k in kinds if k[1] == "linear") == 24 and kinds[3][1] == "full"


def test_afmoe_dense_then_shared_expert_moe():
    d = {"model_type": "afmoe", "hidden_size": 1024, "num_hidden_layers": 56, "num_attention_heads": 8,
         "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 200192, "intermediate_size": 3072,
         "moe_intermediate_size": 256, "num_experts": 128, "num_experts_per_tok": 8, "num_shared_experts": 1,
         "num_dense_layers": 2, "sliding_window": 2048, "global_attn_every_n_layers": 4}
    cfg = from_hf_config(d, "nano")
    assert cfg.moe_layers == 54 and cfg.shared_experts == 1
    assert sum(1 for k in cfg.layer_kinds() if k[1] == "full") == 14


@pytest.mark.parametrize("mt,piece", [("mamba", "state-space"), ("jamba", "Mamba"), ("minimax", "lightning")])
def test_unmodelled_family_names_the_missing_piece(mt, piece):
    with pytest.raises(ModelConfigError, match=piece):
        from_hf_config({"model_type": mt, "hidden_size": 8}, "x")


def test_nested_family_without_text_config_is_named():
    with pytest.raises(ModelConfigError, match="text_config"):
        from_hf_config({"model_type": "llama4"}, "x")
