"""`trnsim estimate infer|train` print the size x group table of collectives and put it in --json."""
import json

import pytest

import trnsim.fabric as fabric
from trnsim.cli.main import main

P5 = ["estimate", "infer", "--model", "llama-3-70b", "--instance", "p5.48xlarge", "--tp", "8", "--batch", "1",
      "--input", "2048", "--output", "256"]


def test_infer_json_has_the_table_per_phase(capsys):
    assert main(P5 + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    (r,) = d["collective_table"]["decode"]
    assert set(r) == {"op", "bytes", "ranks", "calls", "us_per_call", "total_ms", "algorithm", "links"}
    # 80 layers x 2 + 1 all-reduces of 8192 x 2 bytes over the 8 GPUs of the NVLink domain
    assert (r["op"], r["bytes"], r["ranks"], r["calls"], r["links"]) == ("all-reduce", 16384, 8, 161, ["NVLink"])
    assert r["us_per_call"] == pytest.approx(fabric.collective("p5.48xlarge", "all-reduce", 16384, 8).time_us)
    assert r["total_ms"] == pytest.approx(d["breakdown"]["decode_comm_ms"])


def test_infer_table_prints_it(capsys):
    assert main(P5) == 0
    out = capsys.readouterr().out
    assert "Collectives by size and group" in out
    line = next(x for x in out.splitlines() if "decode step" in x and "all-reduce" in x)
    assert "16KiB" in line and "161" in line and "NVLink" in line


def test_train_table_prints_neuronlink_and_efa(capsys):
    assert main(["estimate", "train", "--model", "llama-3-8b", "--instance", "trn1.32xlarge", "--nodes", "2",
                 "--tp", "8", "--pp", "2", "--zero", "1", "--global-batch", "8", "--recompute", "none", "--no-sp"]) == 0
    out = capsys.readouterr().out
    assert "Collectives by size and group (per step)" in out
    rs = next(x for x in out.splitlines() if "reduce-scatter" in x and "EFA" in x)
    assert "NeuronLink" in rs
    # 2 micro-batches x (16 layers x 2 x 2 + 1) TP all-reduces over 8 ranks
    ar = next(x for x in out.splitlines() if "all-reduce" in x and "intra-chip" in x)
    assert " 130 " in ar
