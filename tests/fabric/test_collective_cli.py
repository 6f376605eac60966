"""``trnsim collective`` through ``trnsim.cli.main.main``: JSON keys, sweeps, compare, HTML, errors."""
import json

from trnsim.cli.main import main
from trnsim.fabric import collective


def _run(capsys, argv):
    rc = main(argv)
    return rc, capsys.readouterr().out


def test_json_keys_and_values_match_the_library(capsys):
    rc, out = _run(capsys, ["collective", "all-reduce", "--system", "trn2-ultraserver", "--size", "1GiB", "--json"])
    assert rc == 0
    d = json.loads(out)
    assert {"time_us", "algbw_gbps", "busbw_gbps", "algorithm", "busiest_link"} <= set(d)
    r = collective("trn2-ultraserver", "all-reduce", 2 ** 30)
    assert d["time_us"] == r.time_us and d["algorithm"] == r.algorithm and d["ranks"] == 256


def test_sweep_with_instances_and_ranks(capsys):
    rc, out = _run(capsys, ["collective", "all-reduce", "--system", "trn1.32xlarge", "--instances", "2",
                            "--ranks", "64", "--sweep", "8B:1KiB", "--json"])
    assert rc == 0
    runs = json.loads(out)["runs"]["trn1.32xlarge"]
    assert [r["size_bytes"] for r in runs] == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(r["ranks"] == 64 and r["instances"] == 2 for r in runs)


def test_compare_reports_a_ratio(capsys):
    rc, out = _run(capsys, ["collective", "all-to-all", "--system", "trn3-gen2", "--size", "256MiB",
                            "--compare", "trn2-ultraserver", "--json"])
    assert rc == 0
    d = json.loads(out)
    (row,) = d["compare"]
    assert row["ratio_b_over_a"] == row["time_us_b"] / row["time_us_a"]
    assert row["a"] == "trn3-gen2-ultraserver" and row["b"] == "trn2-ultraserver"


def test_table_and_html(capsys, tmp_path):
    page = tmp_path / "sweep.html"
    rc, out = _run(capsys, ["collective", "all-gather", "--system", "trn1.32xlarge", "--sweep", "1KiB:64KiB",
                            "--html", str(page)])
    assert rc == 0
    assert "busbw" in out and "algbw" in out and "65536" in out
    text = page.read_text()
    assert "<svg" in text or "plotly" in text
    assert "src=\"http" not in text and "src='http" not in text  # nothing fetched over the network


def test_errors_as_json_and_text(capsys):
    rc, out = _run(capsys, ["collective", "all-reduce", "--system", "trn2-ultrasrvr", "--json"])
    d = json.loads(out)
    assert rc == 2 and d["error"]["rule"] == "fabric-system" and "trn2-ultraserver" in d["error"]["hint"]
    rc, out = _run(capsys, ["collective", "all-reduce", "--size", "1ZB", "--json"])
    assert rc == 2 and json.loads(out)["error"]["rule"] == "fabric-size"
    rc, out = _run(capsys, ["collective", "all-reduce", "--system", "trn1.32xlarge", "--ranks", "33", "--json"])
    assert rc == 2 and json.loads(out)["error"]["value"] == 33
    rc = main(["collective", "all-to-all", "--system", "trn1.32xlarge", "--algorithm", "ring"])
    err = capsys.readouterr().err
    assert rc == 2 and "fabric-algorithm" in err
