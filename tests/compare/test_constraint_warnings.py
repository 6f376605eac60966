"""A result that misses its own constraint says so in the table and the summary, not only in --json."""
import json

from trnsim.cli.main import main
from trnsim.compare.constraints import misses
from trnsim.compare.workload import DAY_S, Workload

ARGS = ["compare", "--model", "llama-3-8b", "--tokens", "1T", "--systems", "trn1.32xlarge,p5.48xlarge",
        "--deadline-days", "1", "--max-instances", "2"]


def test_missed_deadline_is_in_table_and_summary(capsys):
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "WARNING: trn1.32xlarge misses its constraint" in out
    assert "(!) takes" in out          # the table row itself carries the mark


def test_missed_deadline_in_json(capsys):
    assert main(ARGS + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for s in d["systems"]:
        # hand check: 1e12 tokens / (tokens/s) against one day
        days = 1e12 / s["metrics"]["tokens_per_s"] / DAY_S
        assert (s["system"] in d["warnings"]) == (days > 1)
    assert "WARNING" in d["summary"]


def test_slo_and_capacity_misses():
    w = Workload(model="llama-3-8b", task="infer", rate=10.0, slo_ttft_ms=100.0, slo_tpot_ms=20.0)
    row = {"system": "x", "metrics": {"ttft_ms": 50.0, "ttft_ms_full_batch": 400.0, "batch": 16, "tpot_ms": 30.0,
                                       "capacity_requests_per_s": 8.0}}
    got = misses(w, row)
    assert len(got) == 3 and "400 ms at batch 16" in got[0] and "TPOT 30.0" in got[1] and "8.00" in got[2]
    ok = {"system": "x", "metrics": {"ttft_ms": 50.0, "tpot_ms": 10.0, "capacity_requests_per_s": 12.0}}
    assert misses(w, ok) == []
