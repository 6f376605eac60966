"""Sweeps of an estimate: the parameter grammar, refused points kept in the table, the estimator called once
per value with the rest fixed (checked with a stand-in estimator whose figures are known by hand)."""
import json
from dataclasses import dataclass

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.sweep import SweepError, parse_sweep, sweep, sweep_page


def test_parse_sweep():
    assert parse_sweep("batch=1,8,32", "infer") == ("batch", (1, 8, 32))
    assert parse_sweep("micro_batch=1,2", "train") == ("micro-batch", (1, 2))
    for bad in ("batch", "batch=1,,2", "batch=0,1", "batch=1,1", "colour=1", "batch=1.5"):
        with pytest.raises(SweepError):
            parse_sweep(bad, "infer")
    with pytest.raises(SweepError) as e:
        parse_sweep("bach=1,2", "infer")
    assert "batch" in e.value.hint


@dataclass(frozen=True)
class _Est:
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float
    memory_per_core_gib: float

    def to_dict(self):
        return dict(self.__dict__)


def _fake(model, instance, batch, tp):
    if batch > 16:
        raise ConfigError("does not fit", rule="memory-fit", value=batch)
    # TPOT = 10 ms + 0.5 ms per sequence; tokens/s = batch / TPOT
    tpot = 10.0 + 0.5 * batch
    return _Est(100.0 * batch, tpot, batch / (tpot / 1e3), 1.0 + batch)


def test_sweep_calls_the_estimator_per_value_and_keeps_refusals():
    s = sweep("infer", "batch", (1, 8, 32), estimate=_fake, model="m", instance="trn2.48xlarge", tp=4)
    cols, rows = s.table()
    assert cols[0] == "batch"
    assert rows[0][2] == "10.5" and rows[1][2] == "14"        # 10 + 0.5 x 1, 10 + 0.5 x 8
    assert rows[1][3] == "571.4"                              # 8 / 14 ms
    assert rows[2][1].startswith("refused: does not fit")
    d = json.loads(json.dumps(s.to_dict()))
    assert [p["value"] for p in d["points"]] == [1, 8, 32] and d["points"][2]["estimate"] is None
    assert "<table>" in s._repr_html_()
    page = sweep_page(s)
    assert 'id="sweep-tpot_ms"' in page


def test_sweep_with_every_point_refused_is_an_error():
    with pytest.raises(SweepError):
        sweep("infer", "batch", (64, 128), estimate=_fake, model="m", instance="x", tp=1)


def test_estimate_cli_sweep(tmp_path, capsys):
    out = tmp_path / "sweep.html"
    rc = main(["estimate", "infer", "--model", "llama-3.1-8b", "--instance", "trn2.48xlarge", "--tp", "8",
               "--input", "512", "--output", "64", "--sweep", "batch=1,4", "--html", str(out), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and [p["value"] for p in d["sweep"]["points"]] == [1, 4]
    a, b = (p["estimate"] for p in d["sweep"]["points"])
    assert a["batch"] == 1 and b["batch"] == 4
    assert out.exists() and "sweep-tpot_ms" in out.read_text()


def test_estimates_show_in_notebooks():
    from trnsim.model import estimate_inference
    e = estimate_inference("llama-3.1-8b", "trn2.48xlarge", tp=8, input_len=256, output_len=32)
    h = e._repr_html_()
    assert "<table>" in h and f"{e.tpot_ms:.4g} ms" in h
