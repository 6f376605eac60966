"""trnsim evaluate: the three steps on the built-in example (torch) and the zoo fallback without torch."""
import json

import pytest

from trnsim.cli.main import main
from trnsim.compare import evaluate as ev_mod
from trnsim.errors import ConfigError


def _no_torch(monkeypatch):
    import trnsim.frontends.torch as ft

    def no_torch():
        raise ft.TorchMissingError("torch is not installed")
    monkeypatch.setattr(ft, "require_torch", no_torch)


def test_example_decision_arithmetic(monkeypatch):
    """Savings, payback and break-even prices follow from the comparisons' own rows by hand."""
    from trnsim.compare.decision import example_decision
    _no_torch(monkeypatch)
    dec = example_decision()
    d = dec.to_dict()
    assert d["compatibility"] is None and any("torch is not installed" in n for n in d["notes"])
    estimated = [j for j in d["jobs"] if not j["error"]]
    assert len(estimated) >= 3
    total = 0.0
    for j in estimated:
        rows = {s["system"]: s for s in j["comparison"]["systems"]}
        trn = [s for s in rows.values() if s["kind"] == "trainium"]
        best = min(trn, key=lambda s: s["cost_usd"])
        assert j["best_trainium"] == best["system"]
        want = (rows["p5.48xlarge"]["cost_usd"] - best["cost_usd"]) * j["runs_per_month"]
        assert j["monthly_saving_usd"] == pytest.approx(want)
        total += max(0.0, want)
        for u in j["unpriced"]:
            # at the break-even price one run costs exactly what the baseline's run costs
            assert u["break_even_usd_per_hour"] * u["instances"] * u["time_s"] / 3600 == \
                pytest.approx(rows["p5.48xlarge"]["cost_usd"])
    assert d["migration_usd"] == pytest.approx(sum(d["migration"].values()))
    if total > 0:
        assert d["payback_months"] == pytest.approx(d["migration_usd"] / total)


def test_evaluate_example_cli_writes_the_report(tmp_path, capsys):
    pytest.importorskip("torch")
    html = tmp_path / "evaluation.html"
    rc = main(["evaluate", "--example", "--html", str(html), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["written"] == [str(html)]
    c = out["compatibility"]
    assert c["total_ops"] > 0 and 0 < c["documented_pct"] <= 100
    assert len(c["cuda_findings"]) >= 1            # the example's hard-coded torch.device("cuda")
    assert out["claims"] and all(x["verdict"] for x in out["claims"])
    text = html.read_text()
    for i in ("summary", "verdict-table", "migration-table", "claims-table", "prices-used", "job-pretrain-70b",
              "pretrain-70b-pareto-chart"):
        assert f'id="{i}"' in text
    assert "Charts need" not in text                 # plotly is a base dependency


def test_evaluate_example_with_a_model_is_refused(capsys):
    rc = main(["evaluate", "x.py:M", "--example", "--json"])
    assert rc == 2 and json.loads(capsys.readouterr().out)["error"]["rule"] == "evaluate-model"


def test_evaluate_rejects_inference():
    from trnsim.compare import Workload
    with pytest.raises(ConfigError) as e:
        ev_mod.evaluate("x.py:M", [(1, 8)], Workload(model="m", task="infer"), [], None)
    assert e.value.rule == "evaluate-task"
