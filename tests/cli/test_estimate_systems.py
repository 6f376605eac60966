"""`trnsim estimate infer|train` on GPU systems as on Trainium: the breakdown and the collectives per kind in
--json, counted by hand."""
import json

import pytest

from trnsim.cli.main import main


def _json(capsys, argv):
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


def test_infer_on_p5_breaks_the_decode_step_down(capsys):
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama-3-70b", "--instance", "p5.48xlarge", "--tp", "8",
                           "--batch", "1", "--input", "2048", "--output", "256", "--json"])
    assert rc == 0 and d["instance"] == "p5.48xlarge" and d["cores"] == 8
    b = d["breakdown"]
    # the decode step is weights + KV + the rest of the compute + collectives + the serving framework's fixed
    # cost per step, nothing else (pp = 1)
    parts = (b["decode_weights_ms"] + b["decode_kv_ms"] + b["decode_compute_ms"] + b["decode_comm_ms"]
             + b["decode_overhead_ms"])
    assert b["decode_overhead_ms"] == pytest.approx(d["framework"]["step_overhead_s"] * 1e3)
    assert parts == pytest.approx(d["tpot_ms"], rel=1e-9)
    # batch-1 decode of a 70B model streams its weights: most of the step
    assert b["decode_weights_ms"] > 0.5 * d["tpot_ms"]
    # 80 layers x 2 tensor-parallel all-reduces + 1 for the embedding, of batch x hidden x 2 bytes
    ar = d["collectives"]["decode"]["all-reduce"]
    assert ar["calls"] == 161 and ar["bytes"] == 161 * 8192 * 2
    assert ar["seconds"] * 1e3 == pytest.approx(b["decode_comm_ms"], rel=1e-9)


def test_train_on_p5_counts_collectives_per_kind(capsys):
    rc, d = _json(capsys, ["estimate", "train", "--model", "llama-3.1-8b", "--instance", "p5.48xlarge", "--tp", "2",
                           "--zero", "1", "--no-sp", "--recompute", "none", "--seq", "8192", "--global-batch", "32",
                           "--json"])
    assert rc == 0 and d["parallel"]["dp"] == 4 and d["micro_batches"] == 8
    k = d["collectives"]
    # per micro-batch: 32 layers x 2 all-reduces x (forward + backward) + 1 embedding; 8 micro-batches
    assert k["all-reduce"]["calls"] == (32 * 2 * 2 + 1) * 8
    assert k["all-reduce"]["bytes"] == k["all-reduce"]["calls"] * 8192 * 4096 * 2
    # ZeRO-1: one gradient reduce-scatter and one parameter all-gather per step
    assert k["reduce-scatter"]["calls"] == 1 and k["all-gather"]["calls"] == 1
    assert sum(c["seconds"] for c in k.values()) == pytest.approx(
        sum(c["seconds"] for c in d["comm"].values()), rel=1e-12)


def test_gpu_refusals_name_gpus(capsys):
    rc = main(["estimate", "infer", "--model", "llama-3-70b", "--instance", "p5.48xlarge", "--tp", "16", "--json"])
    err = json.loads(capsys.readouterr().out)["error"]
    assert rc != 0 and "GPUs" in err["message"] and "NeuronCore" not in err["message"]
    rc = main(["estimate", "train", "--model", "llama-3.1-8b", "--instance", "p5.48xlarge", "--costs", "simulated",
               "--json"])
    assert rc != 0 and json.loads(capsys.readouterr().out)["error"]["rule"] == "costs"


def test_an_unknown_system_lists_trainium_and_gpu_systems(capsys):
    rc = main(["estimate", "infer", "--model", "llama-3-8b", "--instance", "p9.48xlarge", "--json"])
    err = json.loads(capsys.readouterr().out)["error"]
    assert rc != 0 and err["rule"] == "instance" and err["value"] == "p9.48xlarge"
    assert "trn2.48xlarge" in err["limit"] and "p5.48xlarge" in err["limit"]


def test_infer_serving_options_on_gpus(capsys):
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama-2-70b", "--instance", "p5.48xlarge", "--tp", "2",
                           "--replicas", "4", "--precision", "fp8", "--batch", "64", "--input", "300", "--output",
                           "290", "--json"])
    assert rc == 0 and d["cores"] == 8 and d["parallel"]["replicas"] == 4
    assert d["output_tokens_per_s"] == pytest.approx(4 * 64 / (d["tpot_ms"] / 1e3))
    assert d["framework"]["key"] == "trtllm" and d["framework"]["kv_dtype"] == "fp8"   # TRT-LLM's fp8 default
    rc, d = _json(capsys, ["estimate", "infer", "--model", "deepseek-v3", "--instance", "p5en.48xlarge", "--tp", "8",
                           "--attention-dp", "8", "--ep", "8", "--precision", "fp8", "--batch", "64", "--json"])
    assert rc == 0 and d["parallel"]["attention_dp"] == 8


def test_the_table_reads_the_systems_of_a_hardware_file(capsys):
    import os
    import trnsim
    hw = os.path.join(os.path.dirname(trnsim.__file__), "hardware", "examples", "trn4-projection.toml")
    rc = main(["estimate", "infer", "--model", "llama-3.1-70b", "--instance", "trn4-proj-ultraserver", "--tp", "64",
               "--hardware", hw])
    out = capsys.readouterr().out
    assert rc == 0 and "trn4-proj-ultraserver" in out and "memory per NeuronCore" in out
