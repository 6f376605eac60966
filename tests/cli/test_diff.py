"""``trnsim diff a.json b.json`` and ``trnsim.profile.diff.diff_runs``: two saved runs of one
kernel at two sizes compared (latency delta, hand-counted instruction deltas per line), the
table, --json, and the error cases (missing file, not JSON, not a run, multi-target file)."""
import json

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.profile.diff import diff_runs, pick_run

# the kernel file: tests/cli/conftest.py (act_kernel_file)
EXP_LINE = 8   # "e = nl.exp(t)" in conftest.ACT_KERNEL


@pytest.fixture(scope="module")
def runs(tmp_path_factory, act_kernel_file):
    d = tmp_path_factory.mktemp("diff")
    k = d / "actk.py"   # beside the saved runs (the tests below find it there)
    k.write_text(act_kernel_file.read_text())
    a, b = d / "a.json", d / "b.json"
    for path, rows in ((a, 256), (b, 512)):   # 2 and 4 loop iterations
        assert main(["kernel", f"{k}::act", "--arg", f"a={rows}x512:float32", "--timing-only",
                     "--save", str(path)]) == 0
    return str(a), str(b), d


def _run(capsys, argv):
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out


def test_diff_runs_against_hand_counts(runs):
    a_path, b_path, _ = runs
    a, b = json.load(open(a_path)), json.load(open(b_path))
    d = diff_runs(a, b)
    lat = d.latency_us
    assert lat.a == a["latency_us"] and lat.b == b["latency_us"]
    assert lat.delta == pytest.approx(b["latency_us"] - a["latency_us"])
    assert d.speedup == pytest.approx(a["latency_us"] / b["latency_us"])
    assert d.figures["instructions"].a == 6 and d.figures["instructions"].b == 12
    rows = {r.key: r for r in d.by_line}
    exp = rows[f"actk.py:{EXP_LINE}"]
    assert exp.instructions.a == 2 and exp.instructions.b == 4
    assert exp.instructions.delta == 2 and exp.code == "e = nl.exp(t)"
    ops = {r.key: r for r in d.by_opcode}
    assert ops[("dma_copy", "DMA")].instructions.delta == 4     # 2 more loads and stores
    v = d.engines["Scalar"]
    assert v.delta == pytest.approx(b["engines"]["Scalar"] - a["engines"]["Scalar"])
    # largest change first
    deltas = [abs(r.time_ns.delta) for r in d.by_line]
    assert deltas == sorted(deltas, reverse=True)


def test_diff_of_a_run_with_itself_is_zero(runs):
    a = json.load(open(runs[0]))
    d = diff_runs(a, a)
    assert d.latency_us.delta == 0 and d.speedup == 1
    assert all(r.time_ns.delta == 0 for r in d.by_line)


def test_diff_cli_table_and_json(capsys, runs):
    a, b, _ = runs
    rc, out = _run(capsys, ["diff", a, b])
    assert rc == 0 and "B - A" in out and "slower" in out and f"actk.py:{EXP_LINE}" in out
    rc, out = _run(capsys, ["diff", a, b, "--json"])
    assert rc == 0 and json.loads(out)["figures"]["instructions"]["delta"] == 6


def test_diff_reads_kernel_json_output_too(capsys, runs):
    a, _, d = runs
    rc, out = _run(capsys, ["kernel", f"{d / 'actk.py'}::act", "--arg", "a=256x512:float32",
                            "--timing-only", "--json"])
    p = d / "printed.json"
    p.write_text(out)
    rc, out = _run(capsys, ["diff", a, str(p), "--json"])
    assert rc == 0 and json.loads(out)["latency_us"]["delta"] == 0


def test_diff_multi_target_file_needs_target(capsys, runs):
    _, _, d = runs
    m = d / "multi.json"
    assert main(["kernel", f"{d / 'actk.py'}::act", "--arg", "a=256x512:float32", "--timing-only",
                 "--target", "trn1,trn2", "--save", str(m)]) == 0
    capsys.readouterr()
    rc, out = _run(capsys, ["diff", str(m), str(m), "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == "diff-target" and e["limit"] == ["trn1", "trn2"]
    rc, out = _run(capsys, ["diff", str(m), str(m), "--target", "trn1", "--json"])
    assert rc == 0 and json.loads(out)["a"]["target"] == "trn1"


@pytest.mark.parametrize("content,rule", [(None, "input-file"), ("not json", "input-format"),
                                          ('{"x": 1}', "input-format"), ("[1, 2]", "input-format")])
def test_diff_bad_files_are_json_errors(capsys, runs, tmp_path, content, rule):
    a = runs[0]
    p = tmp_path / "bad.json"
    if content is not None:
        p.write_text(content)
    rc, out = _run(capsys, ["diff", a, str(p), "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == rule and str(p) in e["where"]


def test_pick_run_rejects_non_runs():
    with pytest.raises(ConfigError) as ei:
        pick_run({"latency_us": 1.0})
    assert ei.value.rule == "input-format"


def test_diff_top_must_be_positive(capsys, runs):
    rc, out = _run(capsys, ["diff", runs[0], runs[1], "--top", "0", "--json"])
    e = json.loads(out)["error"]
    assert rc == 2 and e["rule"] == "option-value" and e["value"] == 0
