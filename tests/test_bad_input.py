"""Every bad input gets a clear error (issue 14, section 1): one test per category, each checking
that the message names the rule, the value seen and the user's argument or source line, through
``trnsim.cli.main.main`` in-process with ``--json`` (and a few in text mode)."""
import json
import os
import textwrap

import numpy as np
import pytest

from trnsim import api
from trnsim.cli.main import main
from trnsim.errors import ConfigError, TrnsimError
from trnsim.validate import DTYPE_SPELLINGS, parse_dtype

KERNEL = '''\
import neuronxcc.nki.language as nl


def copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def boom(a):
    helper = 1
    raise ValueError(f"my own bug {helper}")


def uninit(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nl.store(out, t)
    return out
'''


@pytest.fixture(scope="module")
def kfile(tmp_path_factory):
    p = tmp_path_factory.mktemp("kern") / "userk.py"
    p.write_text(KERNEL)
    return str(p)


def _json(capsys, argv):
    rc = main(argv + ["--json"])
    cap = capsys.readouterr()
    assert "Traceback (most recent call last)" not in cap.out + cap.err
    body = json.loads(cap.out)
    return rc, body


def _err(capsys, argv):
    rc, body = _json(capsys, argv)
    assert rc == 2, body
    e = body["error"]
    assert set(e) >= {"rule", "message", "where"}
    return e


# -------------------------------------------------------------------- kernel argument parsing
@pytest.mark.parametrize("arg,rule,value", [
    ("a=foo", "arg-value", "foo"),                 # not a shape, not a literal: no string reaches the kernel
    ("a=128xfoo:bf16", "arg-shape", "foo"),
    ("a=-128x4:bf16", "arg-shape", -128),
    ("a=0x4", "arg-shape", 0),
    ("a=128x128:f8", "arg-dtype", "f8"),           # numpy's float64 code, refused by name
    ("a=128x128:float128", "arg-dtype", "float128"),
    ("a=128x128:nope", "arg-dtype", "nope"),
    ("noequals", "arg", "noequals"),
    ("1a=128x128", "arg-name", "1a"),
])
def test_malformed_arguments_name_rule_value_and_argument(capsys, kfile, arg, rule, value):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", arg])
    assert e["rule"] == rule and e["value"] == value and e["where"] == f"--arg {arg}"


def test_unknown_missing_and_duplicate_arguments(capsys, kfile):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "b=128x128"])
    assert e["rule"] == "kernel-args" and e["value"] == "b" and e["limit"] == ["a"] and "'b'" in e["message"]
    e = _err(capsys, ["kernel", f"{kfile}::copy"])
    assert e["rule"] == "kernel-args" and "needs a" in e["message"] and e["value"] == "given: none"
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", "--arg", "a=64x64"])
    assert e["rule"] == "arg-duplicate" and e["value"] == "a" and e["where"] == "--arg a=64x64"


@pytest.mark.parametrize("grid,value", [("abc", "abc"), ("0,2", "0,2"), ("2,-1", "2,-1"), ("", "")])
def test_bad_grid_is_blamed_on_the_argument(capsys, kfile, grid, value):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", "--grid", grid])
    assert e["rule"] == "launch-grid" and e["value"] == value and e["where"] == f"--grid {grid}"


def test_dtype_spellings_are_one_documented_set():
    import ml_dtypes
    assert parse_dtype("f16") == np.float16 and parse_dtype("fp16") == np.float16  # never float128
    assert parse_dtype("f32") == np.float32 and parse_dtype("i32") == np.int32
    assert parse_dtype("bf16") == ml_dtypes.bfloat16 and parse_dtype("fp8_e4m3") == ml_dtypes.float8_e4m3
    assert parse_dtype("float8_e4m3") == ml_dtypes.float8_e4m3
    for canon, aliases in DTYPE_SPELLINGS.items():
        for a in (canon,) + aliases:
            assert parse_dtype(a) == parse_dtype(canon)
    for bad in ("f8", "f2", "i4", "float64", "float128", "complex64", "<f4", "int64"):
        with pytest.raises(ConfigError) as ei:
            parse_dtype(bad)
        assert ei.value.rule == "arg-dtype" and ei.value.value == bad


def test_kernel_help_documents_the_dtype_spellings(capsys):
    with pytest.raises(SystemExit):
        main(["kernel", "--help"])
    out = capsys.readouterr().out.replace("\n", " ")
    assert "bfloat16 (bf16)" in out and "float16 (fp16/f16/half)" in out and "int32 (i32)" in out


# ------------------------------------------------------------------------------------- files
def test_inputs_file_missing_or_not_npz(capsys, kfile, tmp_path):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--inputs", str(tmp_path / "none.npz")])
    assert e["rule"] == "inputs-file" and e["value"] == str(tmp_path / "none.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("hello")
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--inputs", str(bad)])
    assert e["rule"] == "inputs-file" and e["where"] == f"--inputs {bad}" and "npz" in e["message"]
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(3))
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--inputs", str(npy)])
    assert e["rule"] == "inputs-file"


@pytest.mark.parametrize("opt", ["--html", "--trace", "--parquet"])
def test_output_path_is_checked_before_the_run(capsys, kfile, tmp_path, opt, monkeypatch):
    ran = []
    monkeypatch.setattr(api, "time_kernel", lambda *a, **k: ran.append(1))
    target = str(tmp_path / "no" / "such" / "out.x")
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", opt, target])
    assert e["rule"] == "output-path" and e["value"] == target and e["where"] == f"{opt} {target}"
    assert not ran  # refused before any simulation


def test_kernel_file_with_a_syntax_error_shows_the_users_line(capsys, tmp_path):
    p = tmp_path / "broken.py"
    p.write_text("import os\n\ndef f(a:\n    return a\n")
    e = _err(capsys, ["kernel", f"{p}::f"])
    assert e["rule"] == "kernel-syntax" and e["where"].startswith(f"{p}:3")
    assert e["value"] == "def f(a:"


def test_kernel_file_failing_at_import_shows_the_users_frame(capsys, tmp_path):
    p = tmp_path / "imports.py"
    p.write_text("x = 1\ny = undefined_name + x\n")
    e = _err(capsys, ["kernel", f"{p}::f"])
    assert e["rule"] == "kernel-import" and e["where"].startswith(f"{p}:2")
    assert "NameError" in e["message"] and "trnsim" not in e["traceback"].replace(str(p), "")


# ------------------------------------------------------------------------------------- sizes
def test_input_larger_than_the_chip_is_a_capacity_error_not_memoryerror(capsys, kfile):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=100000x100000x100000"])
    assert e["rule"] == "input-capacity" and e["value"] == "4,000,000,000,000,000 bytes"
    assert e["where"] == "--arg a=100000x100000x100000" and "HBM" in e["message"]


def test_input_larger_than_this_machine_is_a_capacity_error(capsys, kfile):
    from trnsim.validate import host_memory_bytes
    host = host_memory_bytes()
    n = host // 4 // 128 + 1  # one float32 array just over the host's memory, under trn2's HBM
    if 128 * n * 4 > 96 * 2**30:
        pytest.skip("this machine has more memory than a trn2 chip has HBM")
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", f"a=128x{n}"])
    assert e["rule"] == "input-capacity" and "memory of this machine" in e["message"]


@pytest.mark.parametrize("size,value", [("100x128x512", 100), ("128x100x512", 100), ("128x128x500", 500),
                                        ("0x128x512", 0), ("12", "12"), ("axbxc", "axbxc")])
def test_demo_size_must_tile(capsys, size, value):
    e = _err(capsys, ["demo", "--size", size])
    assert e["rule"] == "demo-size" and e["value"] == value and e["where"] == f"--size {size}"


# ------------------------------------------------------------------------------ hardware files
def test_zero_clock_from_the_command_line(capsys, kfile, tmp_path):
    hw = tmp_path / "zero.toml"
    hw.write_text('[cores.v3.clocks]\ntensor_hz = { value = 0, source = "choice: test" }\n')
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", "--hardware", str(hw)])
    assert e["rule"] == "hardware-file-range" and e["value"] == 0 and "v3.clocks.tensor_hz" in e["message"]
    e = _err(capsys, ["demo", "--hardware", str(hw)])
    assert e["rule"] == "hardware-file-range"


# ------------------------------------------------------------------------ the kernel's own error
def test_the_kernels_own_exception_shows_the_users_frames(capsys, kfile):
    e = _err(capsys, ["kernel", f"{kfile}::boom", "--arg", "a=128x128"])
    assert e["rule"] == "kernel-exception" and e["message"] == "ValueError: my own bug 1"
    assert e["where"].startswith(f"{kfile}:12 in boom")
    assert f'File "{kfile}", line 12, in boom' in e["traceback"]
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(api.__file__)))
    assert os.path.join(pkg, "trnsim") not in e["traceback"]


def test_the_kernels_own_exception_in_text_mode(capsys, kfile):
    rc = main(["kernel", f"{kfile}::boom", "--arg", "a=128x128"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback (your code only)" in err and "my own bug" in err
    assert "harness.py" not in err and "[kernel-exception]" in err


# ---------------------------------------------------------------------------------- locations
@pytest.mark.parametrize("opt,val", [("--seed", "-1"), ("--trace-limit", "-5")])
def test_negative_counts_are_refused_by_option(capsys, kfile, opt, val):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", opt, val])
    assert e["rule"] == "option-value" and e["value"] == int(val) and e["where"] == f"{opt} {val}"


def test_launch_errors_point_at_the_command_line(capsys, kfile):
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", "--lnc", "2", "--target", "trn1"])
    assert e["rule"] == "lnc-generation" and e["value"] == 2 and e["limit"] == [1]
    assert e["where"] == "--lnc 2 --target trn1"
    e = _err(capsys, ["kernel", f"{kfile}::copy", "--arg", "a=128x128", "--lnc", "0"])
    assert e["value"] == 0 and e["where"] == "--lnc 0"


def test_uninitialized_read_warning_names_the_users_line(kfile, recwarn):
    k = api.load_kernel(kfile, "uninit")
    api.time_kernel(k, np.ones((128, 64), np.float32), target="trn2")
    w = [x for x in recwarn if "uninitialized" in str(x.message)]
    assert w and w[0].filename == kfile and w[0].lineno == 18


def test_launch_site_never_blames_trnsim_or_the_entry_script():
    from trnsim.source import is_internal
    pkg = os.path.dirname(api.__file__)

    def code(fn):
        return compile("pass", fn, "exec")
    assert is_internal(code("<frozen runpy>")) and is_internal(code("/usr/bin/trnsim"))
    assert is_internal(code(os.path.join(pkg, "nki", "harness.py")))
    assert not is_internal(code("/home/me/my_kernel.py"))


def test_no_self_contradicting_limit():
    text = str(TrnsimError("lnc 1 is not allowed here", rule="x", limit=1, value=1))
    assert "limit: 1" not in text and "got: 1" in text
    assert "limit: 2, got: 1" in str(TrnsimError("m", limit=2, value=1))


# -------------------------------------------------------------------------------- --json shape
@pytest.mark.parametrize("argv", [["hw", "show", "nope"], ["models", "--show", "nope"],
                                  ["collective", "all-reduce", "--system", "nope"],
                                  ["estimate", "train", "--model", "nope"], ["demo", "--target", "nope"],
                                  ["kernel", "nope.py::f"], ["kernel"], ["hw", "list", "--hardware", "/no.toml"]])
def test_every_subcommand_reports_errors_as_nested_json(capsys, argv):
    e = _err(capsys, argv)
    assert isinstance(e["rule"], str) and e["message"]


# ----------------------------------------------------------------------------------- piped output
def test_piped_output_is_not_wrapped_at_80_columns(kfile):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-m", "trnsim", "kernel", f"{kfile}::copy", "--arg", "a=128x128:f8"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2
    line = next(x for x in r.stderr.splitlines() if x.startswith("error:"))
    assert len(line) > 200 and "[arg-dtype]" in line and line.endswith("got: f8)")  # one unsplit line
    r = subprocess.run([sys.executable, "-m", "trnsim", "hw", "show", "trn2"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0 and max(len(x) for x in r.stdout.splitlines()) > 80
    assert "…" not in r.stdout  # no cell cut short


def test_help_is_not_wrapped_when_piped_and_honours_columns():
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-m", "trnsim", "kernel", "--help"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0
    # argparse alone wraps at 80 when piped; unwrapped, some option's help runs past 120 columns
    assert max(len(x) for x in r.stdout.splitlines()) > 120
    r = subprocess.run([sys.executable, "-m", "trnsim", "kernel", "--help"], capture_output=True,
                       text=True, timeout=120, env={**env, "COLUMNS": "60"})
    assert r.returncode == 0 and max(len(x) for x in r.stdout.splitlines()) <= 60


def test_bench_reads_calibration_rows_from_the_repository():
    import ast
    import importlib.util
    import sys
    bench = os.path.join(os.path.dirname(__file__), "..", "bench")
    for name in sorted(os.listdir(bench)):
        if name.endswith(".py"):
            src = open(os.path.join(bench, name)).read()
            # a path that climbs out of the clone: os.path.join(HERE, "..", "..", ...) or "../shared"
            strings = [n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant)
                       and isinstance(n.value, str)]
            assert "../shared" not in src and not ("shared" in strings and ".." in strings), name
    spec = importlib.util.spec_from_file_location("_ladder", os.path.join(bench, "timing_ladder.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.path.remove(os.path.dirname(os.path.abspath(mod.__file__)))
    rows = mod.published()
    assert rows["K001"] == ("latency_ms_p99", 51.80)  # the tutorial's published trn1 tiled latency
    assert {f"K{i:03d}" for i in (1, 2, 7, 8, 40, 48)} <= set(rows)
