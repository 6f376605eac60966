"""compare --task finetune (LoRA) and LoRA on a captured graph, checked by hand."""
import pytest

from trnsim.compare import compare
from trnsim.compare.options import make_workload
from trnsim.compare.workload import WorkloadError
from trnsim.cost import PriceBook
from trnsim.model.captured import estimate_ops
from trnsim.model.lora import LoraError
from trnsim.model.ops import Op


def test_finetune_workload_checks_lora_and_tokens():
    with pytest.raises(LoraError):
        make_workload("llama-2-13b", "finetune", tokens=1e9, lora_rank=0, lora_targets="q")
    with pytest.raises(LoraError):
        make_workload("llama-2-13b", "finetune", tokens=1e9, lora_targets="q,bogus")
    with pytest.raises(WorkloadError):
        make_workload("llama-2-13b", "finetune")                       # tokens per run are required
    assert make_workload("llama-2-13b", "train", tokens=1e9).lora == {}


def test_finetune_costs_per_month_and_is_cheaper_than_full_training():
    prices = PriceBook.load().with_overrides({"trn1.32xlarge": 20.0, "p5.48xlarge": 50.0})
    ft = compare(make_workload("llama-2-7b", "finetune", tokens=2e8, seq=4096, runs_per_month=4.0),
                 ["trn1.32xlarge", "p5.48xlarge"], prices, baseline="p5.48xlarge")
    full = compare(make_workload("llama-2-7b", "train", tokens=2e8, seq=4096), ["trn1.32xlarge", "p5.48xlarge"],
                   prices, baseline="p5.48xlarge")
    d = ft.to_dict()
    for s in d["systems"]:
        assert s["usd_per_month"] == pytest.approx(4.0 * s["cost_usd"])
        # the cost is the hours of the run at the given hourly price
        hourly = 20.0 if s["system"] == "trn1.32xlarge" else 50.0
        assert s["cost_usd"] == pytest.approx(hourly * s["instances"] * s["time_s"] / 3600, rel=1e-6)
        assert s["config"]["lora"] == "r16:q,k,v,o"
        # no weight gradients and no AdamW over the base: a LoRA run is faster than full training
        assert s["time_s"] < full.row(s["system"]).choice.time_s
    assert "per month" in d["summary"]


def test_lora_on_a_captured_graph_freezes_linear_layers():
    lin = Op(kind="matmul", name="fc", m=512, k=1024, n=2048, flops=2.0 * 512 * 1024 * 2048,
             bytes=2.0 * (512 * 1024 + 1024 * 2048 + 512 * 2048))
    full = estimate_ops([lin], "trn1.32xlarge", training=True)
    lora = estimate_ops([lin], "trn1.32xlarge", training=True, lora_rank=8)
    base = 2.0 * 512 * 1024 * 2048
    adapters = 2.0 * 512 * 1024 * 8 + 2.0 * 512 * 8 * 2048
    assert full.flops == pytest.approx(3 * base)                      # forward, dgrad, wgrad
    assert lora.flops == pytest.approx(2 * base + 3 * adapters)       # forward + dgrad; adapters train fully
