"""The ``trnsim`` command line: JSON errors, usage errors, demo, exec and kernel through ``main``."""
import json
import subprocess
import sys
import textwrap

import pytest

from trnsim.cli.main import SUBCOMMANDS, build_parser, main


def _out(capsys, argv):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_every_subcommand_registers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= len(SUBCOMMANDS)
    assert {"exec", "demo", "kernel", "hw"} <= set(sub.choices)


def test_user_error_with_json_is_a_json_object_on_stdout(capsys):
    rc, out, err = _out(capsys, ["hw", "show", "no-such-chip", "--json"])
    assert rc == 2
    body = json.loads(out)
    e = body["error"]
    assert e["rule"] == "hw-name" and e["value"] == "no-such-chip" and "where" in e
    assert "no-such-chip" in e["message"] and "trn2" in e["message"]
    assert err == ""


def test_user_error_without_json_is_one_message_on_stderr(capsys):
    rc, out, err = _out(capsys, ["hw", "show", "no-such-chip"])
    assert rc == 2 and out == ""
    assert "error:" in err and "[hw-name]" in err and "Traceback" not in err


def test_usage_error_with_json(capsys):
    rc, out, _ = _out(capsys, ["hw", "show", "--json"])  # NAME missing
    assert rc == 2 and "NAME" in json.loads(out)["error"]["message"]
    rc, out, _ = _out(capsys, ["kernel", "--json"])       # FILE::FUNC missing
    assert rc == 2 and "error" in json.loads(out)


def test_usage_error_without_json_is_argparse_exit_2(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["hw", "show"])
    assert ei.value.code == 2


def test_demo_json_checks_against_numpy(capsys):
    rc, out, _ = _out(capsys, ["demo", "--size", "128x128x512", "--target", "trn1", "--json"])
    s = json.loads(out)
    assert rc == 0 and s["ok"] is True and s["target"] == "trn1"
    # one 128x128x512 tile: a K-loop of one matmul, two loads, one copy out of PSUM, one store
    assert s["by_opcode"]["nc_matmul"] == 1 and s["latency_us"] > 0


def test_demo_bad_size_json(capsys):
    rc, out, _ = _out(capsys, ["demo", "--size", "12", "--json"])
    assert rc == 2 and json.loads(out)["error"]["rule"] == "demo-size"


def test_kernel_missing_file_json(capsys, tmp_path):
    rc, out, _ = _out(capsys, ["kernel", f"{tmp_path}/nope.py::f", "--json"])
    assert rc == 2 and json.loads(out)["error"]["rule"] == "kernel-file"


def test_kernel_text_output(capsys, tmp_path):
    src = tmp_path / "copyk.py"
    src.write_text(textwrap.dedent("""
        import neuronxcc.nki.language as nl

        def copy(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a))
            return out
        """))
    rc, out, _ = _out(capsys, ["kernel", f"{src}::copy", "--arg", "a=128x1024:bf16"])
    assert rc == 0 and "copy on trn2" in out and "latency" in out and "DMA" in out


def _exec(args, env=None):
    return subprocess.run([sys.executable, "-m", "trnsim", "exec", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_exec_sets_the_target_and_serves_the_nki_names():
    code = ("import os, neuronxcc.nki as nki; "
            "print(os.environ['TRNSIM_TARGET'], nki.__name__, "
            "open('/sys/devices/virtual/dmi/id/product_name').read().strip())")
    r = _exec(["--target", "gen4", "--", sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    target, modname, dmi = r.stdout.split()
    assert target == "trn3" and modname.startswith("trnsim.") and dmi == "trn3.48xlarge"


def test_exec_unknown_target_exits_2():
    r = _exec(["--target", "trn9", "--", sys.executable, "-c", "pass"])
    assert r.returncode == 2 and "[target]" in r.stderr and "Traceback" not in r.stderr


def test_exec_whatif_target_from_the_environment(tmp_path):
    import os
    hw = tmp_path / "proj.toml"
    hw.write_text(textwrap.dedent("""
        [cores.v5]
        base = "v4"
        name = "what-if"
        generation = 5
        nc_version = "gen5"
        targets = { value = ["trn4-proj", "gen5"], source = "choice: test projection" }
        [chips.trn4-proj]
        base = "trn3"
        name = "what-if chip"
        core = "v5"
        target = "trn4-proj"
        """))
    env = dict(os.environ, TRNSIM_HARDWARE=str(hw))
    code = ("import neuronxcc.nki; "  # the shims (and the DMI stand-in) load on first import
            "print(open('/sys/devices/virtual/dmi/id/product_name').read().strip())")
    r = _exec(["--target", "gen5", "--", sys.executable, "-c", code], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "trn4-proj"  # a what-if chip names no instance: the target reads
    # the same through --hardware, which hands the file on to CMD
    code2 = "import os; print(os.environ['TRNSIM_HARDWARE'], os.environ['TRNSIM_TARGET'])"
    r = _exec(["--hardware", str(hw), "--target", "gen5", "--", sys.executable, "-c", code2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(hw), "trn4-proj"]
    r = _exec(["--hardware", str(tmp_path / "missing.toml"), "--", sys.executable, "-c", "pass"])
    assert r.returncode == 2 and "[hardware-file]" in r.stderr
