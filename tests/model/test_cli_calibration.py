"""`trnsim models` / `trnsim estimate` (--json keys, errors as JSON) and the calibration's provenance."""
import csv
import json
import os

import pytest

from trnsim.cli.main import main
from trnsim.model.calibrate import BAND_FLOOR, evaluate, rows
from trnsim.model.datafiles import DATA_DIR, load

ALLOWED = {"M0195", "M0397", "M0409", "M0423", "M0425", "M0505"}
SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "calibration", "models.csv")


def _json(capsys, argv):
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


def test_models_json(capsys):
    rc, d = _json(capsys, ["models", "--json"])
    zoo = os.path.join(os.path.dirname(DATA_DIR), "zoo")
    assert rc == 0 and len(d["models"]) == len([f for f in os.listdir(zoo) if f.endswith(".toml")])
    assert {"name", "params", "active_params", "published_params", "source"} <= set(d["models"][0])


def test_estimate_train_json_keys(capsys):
    rc, d = _json(capsys, ["estimate", "train", "--model", "llama-3.1-8b", "--instance", "trn1.32xlarge",
                           "--nodes", "32", "--tp", "32", "--dp", "32", "--zero", "1", "--seq", "8192",
                           "--global-batch", "1024", "--micro-batch", "1", "--json"])
    assert rc == 0
    assert {"step_time_s", "seq_per_s", "tokens_per_s", "mfu", "memory_per_core_gib", "sim_seconds",
            "ops_by_how", "error_band"} <= set(d)
    assert d["ops_by_how"]["roofline"]


def test_estimate_infer_json_keys(capsys):
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama-3-70b", "--instance", "trn2.48xlarge",
                           "--tp", "64", "--lnc", "2", "--batch", "4", "--input", "2048", "--output", "2048",
                           "--json"])
    assert rc == 0
    assert {"ttft_ms", "tpot_ms", "output_tokens_per_s", "memory_per_core_gib", "kv_cache_gib", "sim_seconds",
            "ops_by_how", "error_band"} <= set(d)
    assert d["cores"] == 64


def test_estimate_errors_are_json(capsys):
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama3-70b", "--json"])
    assert rc != 0 and "error" in d and "llama-3-70b" in d["error"]["hint"]
    rc, d = _json(capsys, ["estimate", "train", "--model", "llama-2-7b", "--tp", "3", "--json"])
    assert rc != 0 and d["error"]["rule"] == "parallel-cores"


def test_estimate_table_prints_band(capsys):
    assert main(["estimate", "infer", "--model", "llama-2-7b", "--instance", "trn1.32xlarge", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    assert "TTFT" in out and "±" in out


def test_calibration_uses_only_the_allowed_rows():
    from trnsim.model.serving_calibrate import rows as serving_rows
    assert set(rows()) == ALLOWED
    # trn2/trn3 sections are fitted on the serving rows (copied from found-2026-11.csv); "P102b" is the
    # second figure of row P102
    allowed = ALLOWED | set(serving_rows())
    cal = load("calibration")
    for section in cal.values():
        if isinstance(section, dict):
            for entry in section.values():
                if isinstance(entry, dict) and "rows" in entry:
                    assert {r[:-1] if r.endswith("b") else r for r in entry["rows"]} <= allowed


@pytest.mark.skipif(not os.path.exists(SHARED), reason="the shared calibration folder is not next to the clone")
def test_copied_rows_match_the_shared_file():
    with open(SHARED, newline="", encoding="utf-8") as f:
        shared = {r["id"]: r for r in csv.DictReader(f)}
    for rid, row in rows().items():
        assert row == shared[rid]


def test_recorded_bands_cover_the_rows():
    cal = load("calibration")["roofline"]["trn1"]
    for r in evaluate():
        band = cal[f"band_{r.kind}"]
        assert band >= BAND_FLOOR
        time_err = abs(r.published / r.predicted - 1) if r.metric in ("seq_per_s", "mfu") else abs(r.error)
        assert time_err <= band + 1e-3


def test_estimate_from_a_config_json(tmp_path, capsys):
    from trnsim.model import load_model
    from trnsim.model.hf import to_hf_config
    p = tmp_path / "my_model" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(to_hf_config(load_model("mistral-7b"))))
    rc, d = _json(capsys, ["estimate", "infer", "--model", str(p), "--instance", "trn1.32xlarge", "--tp", "8",
                           "--json"])
    assert rc == 0 and d["model"] == "my_model" and d["tpot_ms"] > 0


def test_precision_a_generation_lacks_is_rejected(capsys):
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama-2-7b", "--instance", "trn1.32xlarge",
                           "--tp", "8", "--precision", "mxfp4", "--json"])
    assert rc != 0 and d["error"]["rule"] == "precision" and d["error"]["value"] == "mxfp4"
    rc, d = _json(capsys, ["estimate", "infer", "--model", "llama-3.1-405b", "--instance", "trn3-gen2-ultraserver",
                           "--tp", "64", "--precision", "mxfp4", "--sparsity", "4:16", "--json"])
    assert rc == 0 and any("NKI API" in n for n in d["notes"])
