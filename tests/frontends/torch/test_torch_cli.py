"""trnsim check on the command line: table, --json, JSON errors, and the missing-torch message."""
import json
import os
import sys

import pytest

from trnsim.cli.main import main

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
CUSTOM = os.path.join(MODELS, "custom_op_model.py")


def test_json_report(capsys):
    pytest.importorskip("torch")
    rc = main(["check", f"{CUSTOM}:CustomMLP", "--input-shape", "4x32", "--dtype", "float32", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["capture"] == "torch.export" and out["total_ops"] == 3
    assert out["coverage_costable_pct"] == pytest.approx(100 * 2 / 3, abs=0.01)
    assert out["non_aten_ops"] == ["trnsim_test::fused_bias_gelu"]
    assert out["needs_custom_kernel"][0]["locations"][0].startswith(f"{CUSTOM}:")
    assert {r["op"]: r["count"] for r in out["ops"]} == {"aten::linear": 2, "trnsim_test::fused_bias_gelu": 1}


def test_table_report(capsys):
    pytest.importorskip("torch")
    rc = main(["check", f"{CUSTOM}:CustomMLP", "--input-shape", "4x16", "--dtype", "float32",
               "--kwargs", "d=16"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "aten::linear" in out and "Needs a custom kernel" in out and "66.7 %" in out


def test_json_errors_have_an_error_key(capsys):
    pytest.importorskip("torch")
    rc = main(["check", os.path.join(MODELS, "nope.py") + ":M", "--input-shape", "1x8", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and "does not exist" in out["error"]["message"] and out["error"]["rule"] == "model-file"
    rc = main(["check", f"{CUSTOM}:Untraceable", "--input-shape", "4x32", "--dtype", "float32", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["error"]["rule"] == "capture" and out["error"]["value"] == "trnsim_test::no_meta_kernel"
    assert out["error"]["where"].startswith(CUSTOM)


def test_without_torch_says_how_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    rc = main(["check", f"{CUSTOM}:CustomMLP", "--input-shape", "4x32"])
    err = capsys.readouterr().err
    assert rc == 2 and "pip install 'trnsim[torch]'" in err and "Traceback" not in err
    rc = main(["check", f"{CUSTOM}:CustomMLP", "--input-shape", "4x32", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["error"]["rule"] == "torch-extra" and "trnsim[torch]" in out["error"]["hint"]
