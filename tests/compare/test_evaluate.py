"""trnsim evaluate: the three steps on the built-in example (torch) and the zoo fallback without torch."""
import json

import pytest

from trnsim.cli.main import main
from trnsim.compare import evaluate as ev_mod
from trnsim.errors import ConfigError


def test_example_without_torch_falls_back_to_the_zoo(monkeypatch):
    import trnsim.frontends.torch as ft

    def no_torch():
        raise ft.TorchMissingError("torch is not installed")
    monkeypatch.setattr(ft, "require_torch", no_torch)
    ev = ev_mod.evaluate_example(tokens=1e10)
    d = ev.to_dict()
    assert d["evaluation"]["compatibility"] is None
    assert any("torch is not installed" in n for n in d["evaluation"]["notes"])
    assert d["workload"]["model"] == "llama-3.1-8b"
    trn = [s for s in d["systems"] if s["kind"] == "trainium"]
    assert trn and all(s["engineering_usd"] > 0 for s in trn)
    assert all(s["total_with_engineering_usd"] == pytest.approx(s["cost_usd"] + s["engineering_usd"])
               for s in d["systems"])


def test_evaluate_example_cli_writes_the_report(tmp_path, capsys):
    pytest.importorskip("torch")
    html = tmp_path / "evaluation.html"
    rc = main(["evaluate", "--example", "--html", str(html), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["written"] == [str(html)]
    c = out["evaluation"]["compatibility"]
    assert c["total_ops"] > 0 and 0 < c["documented_pct"] <= 100
    assert len(c["cuda_findings"]) >= 1            # the example's hard-coded torch.device("cuda")
    assert out["evaluation"]["break_even"] and {"system", "cost_usd", "usd_per_mtok"} <= set(out["systems"][0])
    text = html.read_text()
    for i in ("compatibility", "evaluation-summary", "break-even-table", "compare-table", "engineering-table"):
        assert f'id="{i}"' in text


def test_evaluate_rejects_inference():
    from trnsim.compare import Workload
    with pytest.raises(ConfigError) as e:
        ev_mod.evaluate("x.py:M", [(1, 8)], Workload(model="m", task="infer"), [], None)
    assert e.value.rule == "evaluate-task"
