"""``trnsim plan``: the table, --json keys, Parquet output and errors as JSON."""
import json
import sys

import pytest

from trnsim.cli.main import main

ARGS = ["plan", "--model", "llama-3.1-8b", "--system", "trn1.32xlarge", "--count", "1", "--seq", "2048",
        "--global-batch", "64", "--space", "micro_batch=1", "--space", "recompute=full", "--workers", "1"]


def _json(capsys, argv):
    rc = main(argv + ["--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_json_keys(capsys):
    rc, d = _json(capsys, ARGS + ["--top", "3"])
    assert rc == 0
    for k in ("model", "system", "counts", "objective", "enumerated", "estimated", "dropped", "best",
              "configs_per_s", "backend", "workers", "space"):
        assert k in d
    assert len(d["best"]) == 3 and d["best"][0]["rank"] == 1
    for k in ("config", "label", "score", "step_time_s", "tokens_per_s", "mfu", "memory_per_core_gib"):
        assert k in d["best"][0]
    assert sum(x["count"] for x in d["dropped"]) + d["estimated"] == d["enumerated"]
    assert {"rule", "count", "example", "reason", "meaning"} <= set(d["dropped"][0])


def test_table_output(capsys):
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "Why configurations were dropped" in out and "memory-fit" in out and "Best 10 layouts" in out


def test_cost_objective_uses_the_users_price(capsys):
    rc, d = _json(capsys, ARGS + ["--objective", "cost", "--price", "trn1.32xlarge=10", "--count", "1,2"])
    assert rc == 0 and d["objective"] == "cost" and d["counts"] == [1, 2]
    b = d["best"][0]
    assert b["score"] == pytest.approx(b["config"]["count"] * 10.0 * b["step_time_s"] / 3600.0)


@pytest.mark.parametrize("extra,rule", [
    (["--model", "no-such-model"], "model"),
    (["--system", "trn9.huge"], "instance"),
    (["--global-batch", "0"], "batch"),
    (["--count", "two"], "plan-count"),
    (["--backend", "mpi"], "plan-backend"),
    (["--space", "bogus"], "plan-space"),
])
def test_errors_as_json(capsys, extra, rule):
    rc, d = _json(capsys, ARGS + extra)
    assert rc == 2 and "error" in d
    body = d["error"] if isinstance(d["error"], dict) else d
    assert str(body.get("rule", "")).startswith(rule), d


def test_parquet_out(tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "plan.parquet"
    rc, d = _json(capsys, ARGS + ["--out", str(path)])
    assert rc == 0 and d["out"]["rows"] == d["memory_checked"]
    t = pq.read_table(path)
    assert t.num_rows == d["memory_checked"]
    assert {"tp", "pp", "dp", "status", "step_time_s", "memory_gib", "score"} <= set(t.column_names)
    status = t.column("status").to_pylist()
    assert status.count("ok") == d["estimated"]


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    rc, d = _json(capsys, ARGS + ["--out", str(tmp_path / "x.parquet")])
    assert rc == 2
    assert "trnsim[parquet]" in json.dumps(d)


def test_a_bad_out_path_fails_before_the_search(capsys, tmp_path):
    pytest.importorskip("pyarrow")
    rc, d = _json(capsys, ARGS + ["--out", str(tmp_path / "no" / "such" / "x.parquet")])
    assert rc == 2 and "no such folder" in json.dumps(d)
