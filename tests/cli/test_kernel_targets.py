"""``trnsim kernel ... --target trn1,trn2,trn3``: one run per target, figures side by side (table
and JSON), the same figures as a plain run on each target; the profile in ``--json``; bad
--target / --top values as JSON errors before any run."""
import json

import pytest

from trnsim import api
from trnsim.cli.main import main

# the kernel file: tests/cli/conftest.py (act_kernel_file)
ARGS = ["--arg", "a=256x512:float32", "--timing-only"]


@pytest.fixture(scope="module")
def kfile(act_kernel_file):
    return str(act_kernel_file)


def _run(capsys, argv):
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out


def test_targets_json_matches_a_run_per_target(capsys, kfile):
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", "trn1,trn2,trn3", "--json"])
    assert rc == 0
    doc = json.loads(out)
    assert list(doc["targets"]) == ["trn1", "trn2", "trn3"]
    for t, row in doc["targets"].items():
        rc, one = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", t, "--json"])
        one = json.loads(one)
        assert row["latency_us"] == one["latency_us"] and row["hfu"] == one["hfu"]
        assert row["hbm_gbps"] == one["hbm_gbps"]
        assert row["engines"]["Scalar"] == one["engines"]["Scalar"]
        assert row["verdict"] == one["bottleneck"] == one["profile"]["verdict"]
        assert row["profile"]["hotspots"]["by_line"][0]["instructions"] == \
            one["profile"]["hotspots"]["by_line"][0]["instructions"]
    lat = {t: r["latency_us"] for t, r in doc["targets"].items()}
    for t in lat:
        assert doc["targets"][t]["speedup_vs_first"] == pytest.approx(lat["trn1"] / lat[t])


def test_targets_table_shows_each_target_side_by_side(capsys, kfile):
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", "trn1,trn3"])
    assert rc == 0
    header = next(line for line in out.splitlines() if "figure" in line)
    assert "trn1" in header and "trn3" in header
    assert "speed-up vs trn1" in out and "Scalar (ACT) busy" in out and "HBM bandwidth" in out
    assert "trn1:" in out and "trn3:" in out       # a verdict line per target


def test_compare_targets_api_dedups_spellings(kfile):
    k = api.kernel_of(api.load_kernel(f"{kfile}::act"))
    ins = api.make_inputs(["a=256x512:float32"], numerics=False)
    pos, kw = api.bind_inputs(k, ins)
    ests = api.compare_targets(k, *pos, targets=["trn2", "gen3"], **kw)
    assert list(ests) == ["trn2"]     # gen3 is trn2's other name: one run


@pytest.mark.parametrize("value,rule", [("trn1,nope", "target"), ("trn1,,trn2", "option-value")])
def test_bad_target_list_is_a_json_error_before_any_run(capsys, kfile, monkeypatch, value, rule):
    ran = []
    monkeypatch.setattr(api, "time_kernel", lambda *a, **k: ran.append(1))
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", value, "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == rule and not ran


def test_profile_outputs_need_one_target(capsys, kfile, tmp_path):
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", "trn1,trn2",
                            "--html", str(tmp_path / "r.html"), "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == "targets-outputs" and e["value"] == "trn1,trn2"


def test_top_must_be_positive(capsys, kfile):
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--top", "0", "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == "option-value" and e["value"] == 0


def test_single_run_terminal_summary_has_the_profile_tables(capsys, kfile):
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--top", "3", "--detail"])
    assert rc == 0
    for title in ("hotspots: top 3 source lines", "per opcode", "idle time waits on",
                  "roofline point", "DMA: 4 transfers", "longest stalls", "critical path",
                  "on-chip memory over time"):
        assert title in out
    assert "e = nl.exp(t)" in out and "Tensor engine waits" not in out


def test_hotspot_ties_list_in_program_order(capsys, kfile):
    # the load (line 7) and the store (line 9) move the same bytes the same number of times:
    # equal time and count on trn1, so they list in source order on every run
    rc, out = _run(capsys, ["kernel", f"{kfile}::act", *ARGS, "--target", "trn1", "--json"])
    rows = json.loads(out)["profile"]["hotspots"]["by_line"]
    tied = [r["source"] for r in rows
            if (r["time_ns"], r["instructions"]) == (rows[0]["time_ns"], rows[0]["instructions"])]
    assert tied == ["actk.py:7", "actk.py:9"]
