"""compare() with the real estimators (Trainium and GPU) and the CLI: JSON keys, configs found, exit codes."""
import json

import pytest

from trnsim.cli.main import main
from trnsim.compare import Workload, compare, parse_delays, parse_systems, resolve_system
from trnsim.cost import PriceBook
from trnsim.errors import ConfigError

KEYS = {"system", "config", "time_s", "cost_usd", "usd_per_mtok", "energy_kwh", "error_band", "instances",
        "tokens_per_mwh", "price_performance"}


def test_train_compare_finds_configs_meeting_the_deadline():
    w = Workload(model="llama-3-8b", task="train", tokens=1e11, deadline_s=10 * 86400)
    c = compare(w, ["trn1.32xlarge", "p5.48xlarge"], PriceBook.load(), baseline="p5.48xlarge")
    for r in c.rows:
        d = r.to_dict()
        assert KEYS <= set(d)
        assert d["time_s"] <= 10 * 86400
        # cost is the instance-hours at the price used, by definition of the $ column
        assert d["cost_usd"] == pytest.approx(d["instances"] * d["time_s"] / 3600 * d["usd_per_hour"])
        assert d["error_band"]["time_s"][0] < d["time_s"] < d["error_band"]["time_s"][1]
        assert 0.05 < d["metrics"]["mfu"] < 0.9
    assert c.row("p5").to_dict()["price_performance"] == pytest.approx(1.0)


def test_infer_compare_meets_the_tpot_slo_and_carries_the_rate():
    w = Workload(model="llama-3-8b", task="infer", input_len=2048, output_len=512, rate=50, slo_tpot_ms=50)
    c = compare(w, ["inf2.48xlarge", "trn2.48xlarge", "p5.48xlarge"],
                PriceBook.load(overrides={"trn2.48xlarge": 35.76}), baseline="p5.48xlarge")
    assert {r.system for r in c.rows} | {s for s, _ in c.skipped} == {"inf2.48xlarge", "trn2.48xlarge", "p5.48xlarge"}
    for r in c.rows:
        m = r.choice.metrics
        assert m["tpot_ms"] <= 50
        assert m["capacity_requests_per_s"] >= 50
        # a month of output tokens at 50 requests/s x 512 tokens
        assert r.choice.tokens == pytest.approx(50 * 512 * 30 * 86400)


def test_unknown_system_and_bad_delay_are_config_errors():
    with pytest.raises(ConfigError) as e:
        resolve_system("p9.huge")
    assert e.value.rule == "system"
    with pytest.raises(ConfigError):
        parse_delays(["trn3-gen2=soon"])
    assert parse_delays(["trn3-gen2=90d"]) == {"trn3-gen2-ultraserver": 90 * 86400.0}
    with pytest.raises(ConfigError):
        parse_systems("p5,p5.48xlarge", "train")   # the same system twice


def test_cli_json_lists_systems(capsys, tmp_path):
    csv, md = tmp_path / "c.csv", tmp_path / "c.md"
    rc = main(["compare", "--model", "llama-3-8b", "--tokens", "1e10", "--systems", "trn1.32xlarge,p5.48xlarge",
               "--price", "p5.48xlarge=40", "--csv", str(csv), "--md", str(md), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [s["system"] for s in out["systems"]] and KEYS <= set(out["systems"][0])
    assert out["baseline"] == "p5.48xlarge" and "summary" in out and out["sensitivity"]["cases"]
    p5 = next(s for s in out["systems"] if s["system"] == "p5.48xlarge")
    assert p5["usd_per_hour"] == 40.0
    assert csv.read_text().count("\n") == 3 and "| system |" in md.read_text()


def test_cli_missing_price_is_a_json_error(capsys):
    rc = main(["compare", "--model", "llama-3-8b", "--tokens", "1e10", "--systems", "trn2.48xlarge,p5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc != 0 and out["error"]["rule"] == "price" and "trn2.48xlarge" in out["error"]["message"]
