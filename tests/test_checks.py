"""The one check of user numbers: the command line and the Python API refuse the same values with the
same error (rule, message, limit, value); zero counts are refused, never replaced by a default; NaN and
infinity never reach a result; names chosen from a list suggest the nearest ones."""
import json
import math

import pytest

from trnsim.checks import check_value, did_you_mean, unknown_name
from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.model import estimate_inference, estimate_training


def _cli_error(capsys, argv):
    rc = main(argv + ["--json"])
    out = capsys.readouterr().out
    body = json.loads(out)  # strict JSON: json.loads refuses nothing here, the check below does
    assert rc == 2, body
    return body["error"]


def _api_error(fn, **kw):
    with pytest.raises(ConfigError) as e:
        fn(**kw)
    return e.value.as_dict()


CASES = [
    (["estimate", "train", "--model", "llama-3-8b", "--global-batch", "0"],
     lambda: _api_error(estimate_training, model="llama-3-8b", global_batch=0)),
    (["estimate", "train", "--model", "llama-3-8b", "--dp", "0"],
     lambda: _api_error(estimate_training, model="llama-3-8b", dp=0)),
    (["estimate", "infer", "--model", "llama-3-8b", "--rate", "1", "--max-batch", "0"],
     lambda: _api_error(estimate_inference, model="llama-3-8b", rate=1.0, max_batch=0)),
    (["estimate", "infer", "--model", "llama-3-8b", "--rate", "nan"],
     lambda: _api_error(estimate_inference, model="llama-3-8b", rate=float("nan"))),
    (["estimate", "infer", "--model", "llama-3-8b", "--rate", "inf"],
     lambda: _api_error(estimate_inference, model="llama-3-8b", rate=math.inf)),
    (["estimate", "infer", "--model", "llama-3-8b", "--rate", "1", "--requests", "1000000000"],
     lambda: _api_error(estimate_inference, model="llama-3-8b", rate=1.0, requests=10**9)),
    (["estimate", "infer", "--model", "llama-3-8b", "--seed", "-1"],
     lambda: _api_error(estimate_inference, model="llama-3-8b", seed=-1)),
    (["estimate", "train", "--model", "llama-3-8b", "--nodes", "1000000000"],
     lambda: _api_error(estimate_training, model="llama-3-8b", nodes=10**9)),
]


@pytest.mark.parametrize("argv,api", CASES, ids=[" ".join(c[0][:2] + c[0][-2:]) for c in CASES])
def test_cli_and_api_refuse_with_the_same_error(capsys, argv, api):
    cli = _cli_error(capsys, argv)
    py = api()
    for k in ("rule", "message", "limit", "value"):
        assert cli.get(k) == py.get(k), (k, cli, py)
    assert cli["rule"] in ("option-value", "batch")


def test_api_refuses_floats_and_bools_where_counts_are_meant():
    for kw in (dict(nodes=2.0), dict(tp=True), dict(micro_batch="2")):
        with pytest.raises(ConfigError) as e:
            estimate_training("llama-3-8b", **kw)
        assert "whole number" in e.value.message


def test_nonfinite_values_are_text_in_the_error():
    with pytest.raises(ConfigError) as e:
        check_value("pue", float("nan"))
    assert e.value.value == "nan"
    json.dumps(e.value.as_dict(), allow_nan=False)  # no bare NaN in the error either


def test_negative_egress_refused(capsys):
    e = _cli_error(capsys, ["evaluate", "--example", "--egress-gb", "-5"])
    assert e["rule"] == "option-value" and e["value"] == -5.0 and "negative" in e["message"]


def test_nan_length_distribution_refused(capsys):
    e = _cli_error(capsys, ["estimate", "infer", "--model", "llama-3-8b", "--rate", "1", "--input-dist",
                            "exp:nan"])
    assert e["rule"] == "length-distribution"


def test_evaluate_file_and_example_conflict(capsys, tmp_path):
    e = _cli_error(capsys, ["evaluate", str(tmp_path / "m.py") + ":M", "--example"])
    assert e["rule"] == "evaluate-model" and "not both" in e["limit"]


def test_hw_show_typo_is_refused_with_suggestion(capsys):
    e = _cli_error(capsys, ["hw", "show", "trn2.48xlarg"])
    assert e["rule"] == "hw-name" and e["hint"].startswith("did you mean trn2.48xlarge")


def test_misspelt_price_refused(capsys):
    e = _cli_error(capsys, ["compare", "--model", "llama-3-8b", "--tokens", "1e9", "--price", "trn2.48xlarg=1"])
    assert e["rule"] == "price-system" and "trn2.48xlarge" in e["hint"]


def test_misspelt_price_file_refused(capsys, tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("system,usd_per_hour\ntrn1.32xlarg,3\n")
    e = _cli_error(capsys, ["compare", "--model", "llama-3-8b", "--tokens", "1e9", "--prices", str(f)])
    assert e["rule"] == "price-system" and "trn1.32xlarge" in e["hint"]


def test_binary_price_file_is_a_user_error(capsys, tmp_path):
    f = tmp_path / "p.toml"
    f.write_bytes(b"\x00\xff\xfe\x80")
    e = _cli_error(capsys, ["compare", "--model", "llama-3-8b", "--tokens", "1e9", "--prices", str(f)])
    assert e["rule"].startswith("price-file")


def test_did_you_mean():
    assert did_you_mean("trn2.48xlarg", ["trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge"]).startswith(
        "did you mean trn2.48xlarge")
    assert did_you_mean("zzzz", ["trn1", "trn2"]) is None
    e = unknown_name("system", "tr2", ["trn1", "trn2"], rule="x")
    assert e.rule == "x" and e.hint in ("did you mean trn2, trn1?", "did you mean trn2?")


def test_diff_target_is_honoured_or_refused(capsys, tmp_path):
    run = {"kernel": "k", "target": "trn2", "latency_us": 1.0, "engines": {}}
    a = tmp_path / "a.json"
    a.write_text(json.dumps(run))
    e = _cli_error(capsys, ["diff", str(a), str(a), "--target", "trn1"])
    assert e["rule"] == "diff-target" and e["value"] == "trn1"


def test_deeply_nested_json_is_a_user_error(capsys, tmp_path):
    a = tmp_path / "a.json"
    a.write_text("[" * 100000 + "]" * 100000)
    e = _cli_error(capsys, ["diff", str(a), str(a)])
    assert e["rule"] == "input-format"


SPELLING = [
    (["estimate", "train", "--model", "llama-3-8b", "--instance", "trn1.32xlarg"], "trn1.32xlarge"),
    (["estimate", "train", "--model", "lama-3-8b"], "llama-3-8b"),
    (["estimate", "train", "--model", "llama-3-8b", "--precision", "bf61"], "bf16"),
    (["estimate", "train", "--model", "llama-3-8b", "--recompute", "ful"], "full"),
    (["plan", "--model", "llama-3-8b", "--system", "trn2.48xlarge", "--global-batch", "8", "--objective", "tim"],
     "time"),
    (["plan", "--model", "llama-3-8b", "--system", "trn2.48xlarge", "--global-batch", "8", "--backend", "rey"],
     "ray"),
    (["compare", "--model", "llama-3-8b", "--tokens", "1T", "--price-kind", "spt"], "spot"),
    (["collective", "all-reduc", "--system", "trn2.48xlarge"], "all-reduce"),
    (["hw", "sho", "trn2"], "show"),
]


@pytest.mark.parametrize("argv,near", SPELLING, ids=[a[-1] for a, _ in SPELLING])
def test_names_from_a_list_suggest_the_nearest(capsys, argv, near):
    e = _cli_error(capsys, argv)
    text = (e.get("hint") or "") + e["message"]
    assert "did you mean" in text and near in text.split("did you mean", 1)[1], e


def test_kernel_names_targets_dtypes_and_attributes_suggest(capsys, tmp_path):
    k = tmp_path / "k.py"
    k.write_text("import neuronxcc.nki.language as nl\n\ndef copy(a):\n"
                 "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
                 "    nl.store(out, nl.lod(a))\n    return out\n")
    cases = [([f"{k}::cpy", "--arg", "a=128x128"], "copy"),
             ([f"{k}::copy", "--arg", "a=128x128", "--target", "trn22"], "trn2"),
             ([f"{k}::copy", "--arg", "a=128x128:bf61"], "bf16"),
             ([f"{k}::copy", "--arg", "a=128x128"], "load")]
    for argv, near in cases:
        e = _cli_error(capsys, ["kernel"] + argv)
        assert e["hint"].startswith("did you mean") and near in e["hint"], (argv, e)


def test_hardware_file_keys_suggest(capsys, tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text('[cores.v3.sbuf]\npartitons = { value = 128, source = "choice: test" }\n')
    e = _cli_error(capsys, ["hw", "list", "--hardware", str(hw)])
    assert e["hint"] == "did you mean partitions for partitons?"


def test_api_errors_carry_the_same_suggestion():
    with pytest.raises(ConfigError) as e:
        estimate_training("llama-3-8b", "trn1.32xlarg")
    assert e.value.hint.startswith("did you mean trn1.32xlarge")


def test_every_api_default_of_none_is_allowed_by_the_limits():
    """A parameter whose API default is None (computed later) must be 'optional' in limits.toml, else
    calling the function with its own defaults would be refused."""
    import inspect

    from trnsim.checks import limits
    from trnsim.compare.options import make_power, make_workload
    params = limits()["params"]
    for fn in (estimate_training, estimate_inference, make_workload, make_power):
        for name, p in inspect.signature(fn).parameters.items():
            if name in params and p.default is None:
                assert params[name].get("optional"), f"{fn.__name__}({name}=None) is refused by limits.toml"


def test_wrong_types_for_names_are_config_errors_not_type_errors():
    from trnsim.api import make_inputs
    from trnsim.compare import parse_systems
    from trnsim.plan import plan
    calls = [lambda: estimate_training(5), lambda: estimate_training("llama-3-8b", 1.5),
             lambda: estimate_training("llama-3-8b", precision=True), lambda: estimate_inference("llama-3-8b", lnc=1.5),
             lambda: plan("llama-3-8b", "trn2.48xlarge", global_batch=8, space=1.5),
             lambda: plan("llama-3-8b", "trn2.48xlarge", global_batch=8, objective=3),
             lambda: parse_systems(5, "train"), lambda: make_inputs(5), lambda: make_inputs("a=4x4")]
    for call in calls:
        with pytest.raises(ConfigError) as e:
            call()
        assert e.value.rule in ("option-type", "option-value"), e.value
