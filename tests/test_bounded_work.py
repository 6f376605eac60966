"""Work is bounded before it starts: the demo's host memory, request/node/worker counts and sweep
lengths against the stated limits (trnsim/data/limits.toml), and --timeout for kernels that never end.
Also the one size and count grammar (SI and IEC prefixes, bits refused)."""
import json
import time

import pytest

from trnsim.checks import limits, parse_count
from trnsim.cli.main import main
from trnsim.cli.run_cmd import demo_host_bytes
from trnsim.errors import ConfigError
from trnsim.fabric import parse_size, parse_sweep

SPIN = '''
import neuronxcc.nki.language as nl

def spin(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    while True:
        pass
    nl.store(out, t)
    return out
'''


def _err(capsys, argv):
    rc = main(argv + ["--json"])
    body = json.loads(capsys.readouterr().out)
    assert rc == 2, body
    return body["error"]


def test_huge_demo_is_refused_with_the_bytes_it_needs(capsys):
    e = _err(capsys, ["demo", "--size", "65536x65536x65536"])
    need = demo_host_bytes(65536, 65536, 65536)
    # hand count: inputs 2 x 65536^2 elements at 12 B, output 65536^2 at 18 B
    assert need == (2 * 12 + 18) * 65536 ** 2
    assert e["rule"] == "host-memory" and e["value"] == f"{need:,} bytes"


def test_infinite_loop_kernel_stops_at_the_timeout(capsys, tmp_path):
    k = tmp_path / "spin.py"
    k.write_text(SPIN)
    t0 = time.monotonic()
    e = _err(capsys, ["kernel", f"{k}::spin", "--arg", "a=128x128", "--timeout", "1"])
    assert time.monotonic() - t0 < 30
    assert e["rule"] == "timeout" and e["limit"] == "1 s"
    assert e["where"].startswith(f"{k}:7")   # the kernel's own line it was stuck on


@pytest.mark.parametrize("argv,name", [
    (["estimate", "infer", "--model", "llama-3-8b", "--rate", "1", "--requests", "1000000000"], "requests"),
    (["estimate", "train", "--model", "llama-3-8b", "--nodes", "1000000000"], "nodes"),
    (["plan", "--model", "llama-3-8b", "--system", "trn2.48xlarge", "--global-batch", "8", "--workers",
      "100000"], "workers"),
])
def test_counts_over_their_stated_limit_are_refused(capsys, argv, name):
    e = _err(capsys, argv)
    cap = limits()["params"][name]["max"]
    assert e["value"] > cap and f"{cap:,}" in e["limit"]


def test_sweep_with_a_factor_near_one_is_refused():
    with pytest.raises(ConfigError) as e:
        parse_sweep("8B:1GiB:1.0000001")
    assert e.value.rule == "sweep-length"
    assert len(parse_sweep("8B:1GiB")) == 28   # 2^3 .. 2^30


def test_size_grammar():
    assert parse_size("1G") == 2 ** 30 and parse_size("1GiB") == 2 ** 30
    assert parse_size("1GB") == 10 ** 9 and parse_size("1T") == 2 ** 40 and parse_size("8B") == 8
    for bits in ("1Gb", "8b", "1kb", "2Mib"):
        with pytest.raises(ConfigError) as e:
            parse_size(bits)
        assert "bits" in e.value.message


def test_count_grammar(capsys):
    assert parse_count("1T") == 1e12 and parse_count("250G") == 250e9 and parse_count("4M") == 4e6
    assert parse_count("1e12") == 1e12
    for bad in ("1Ti", "nan", "inf", "-1T", "0"):
        with pytest.raises(ConfigError):
            parse_count(bad)
